-- settings_put: set some of a queue's settings (SPEC 13, 14) and, in the same step, trim its event
-- log to its `events` setting now: exactly the last N kept, none (the log dropped) for 0. burst 0
-- unsets it (back to max(1, ceil(rate))); a rate set fills the token bucket (bt, bts dropped). A
-- flow-control setting given may let held jobs go: the queue's consumers are woken (unless it is
-- paused or holds no ready job; lowering a limit takes nothing back, and a woken consume that is
-- still held back only deletes the token), and a group_concurrency given puts every group with a
-- free slot and a ready job back in the ring.
-- KEYS[1] the queue's settings hash  KEYS[2] the queue's events stream
-- ARGV[1..] the settings to set: name, value, name, value... (validated by the web layer)
-- The queue's other keys are built from KEYS[1] "qc/{ns}/q": the same hash tag, so the same slot.
-- Returns the events setting now.
local flows = false
for i = 1, #ARGV, 2 do
    local name, value = ARGV[i], ARGV[i + 1]
    if name == 'burst' and value == '0' then
        redis.call('HDEL', KEYS[1], 'burst')
    else
        redis.call('HSET', KEYS[1], name, value)
    end
    if name == 'rate' then
        redis.call('HDEL', KEYS[1], 'bt', 'bts')
    end
    if name == 'max_reserved' or name == 'rate' or name == 'burst' or name == 'group_concurrency' then
        flows = true
    end
end
local base = string.sub(KEYS[1], 4)
if flows and not paused('n/' .. base) then
    fc().reopen_all(base)
    if fc().has_ready(base) then
        ensure_wake('w/' .. base)
    end
end
local most = tonumber(redis.call('HGET', KEYS[1], 'events')) or 0
if most > 0 then
    redis.call('XTRIM', KEYS[2], 'MAXLEN', most)
else
    redis.call('DEL', KEYS[2])
end
return most
