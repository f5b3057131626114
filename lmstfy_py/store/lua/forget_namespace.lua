-- forget_namespace: the last step of a purge. Only when nothing of the namespace waits any more
-- (no timer member, no ready, priority or dead element in any queue it registered) are its
-- queue registry, wake lists, queue meta hashes and flow-control state (rings, slots, ready-since
-- and due-second counts: nothing of them is left then) deleted; else nothing changes and the purge
-- goes round again. A plain DEL of the timer would orphan a job another process published
-- meanwhile: its data without its member, never delivered, and with ttl 0 never expiring.
-- KEYS[1] timer zset  KEYS[2] queue registry set
-- ARGV[1..5] key prefixes "x/{ns}/" of ready lists, dead lists, wake lists, priority sets,
-- meta hashes
-- Queue keys are built from those prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns 1 when the namespace was forgotten, 0 when something still waits.
if redis.call('ZCARD', KEYS[1]) > 0 then
    return 0
end
local queues = redis.call('SMEMBERS', KEYS[2])
for _, q in ipairs(queues) do
    if redis.call('LLEN', ARGV[1] .. q) > 0 or redis.call('LLEN', ARGV[2] .. q) > 0
        or redis.call('EXISTS', ARGV[4] .. q) == 1
        or redis.call('EXISTS', 'gy/' .. string.sub(ARGV[5] .. q, 3)) == 1 then
        return 0
    end
end
for _, q in ipairs(queues) do
    -- and what flow control keeps per queue (SPEC 14), built from its meta key n/{ns}/q
    local base = string.sub(ARGV[5] .. q, 3)
    redis.call('DEL', ARGV[3] .. q, ARGV[5] .. q, 'gr/' .. base, 'gs/' .. base, 'gy/' .. base, 'dd/' .. base)
end
redis.call('DEL', KEYS[2])
return 1
