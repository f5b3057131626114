-- purge_timer: delete one chunk of a namespace's timer (delayed and reserved jobs) with the
-- jobs' data. The caller repeats it until the timer is empty, so Redis is never blocked for
-- long (Engine.purge_namespace).
-- KEYS[1] timer zset
-- ARGV[1] chunk size  ARGV[2] job key prefix of the namespace "j/{ns}/"  ARGV[3] meta hash prefix
-- Job and meta keys are built from the prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {jobs deleted, members left}.
local n = tonumber(ARGV[1])
local members = redis.call('ZRANGE', KEYS[1], 0, n - 1, 'WITHSCORES')
local deleted = 0
for at = 1, #members, 2 do
    local _, q, _, id, reserved, expiry, wake = unpack_member(members[at])
    local job, meta = ARGV[2] .. q .. '/' .. id, ARGV[3] .. q
    if not wake then
        -- A grouped job holding its slot frees it (a ready one's element goes with its group's list).
        local f = redis.call('HMGET', job, 'g', 's', 'h')
        if f[1] and not expiry and (f[2] == 'X' or f[3]) then
            fc().slot_freed(meta, f[1])
        end
        deleted = deleted + redis.call('DEL', job)
    end
    if reserved then
        count(meta, 'X', -1)
    elseif not expiry and not wake then
        undelayed(meta, members[at + 1])
    end
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
return {deleted, redis.call('ZCARD', KEYS[1])}
