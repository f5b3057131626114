-- purge_timer: delete one chunk of a namespace's timer (delayed and reserved jobs) with the
-- jobs' data. The caller repeats it until the timer is empty, so Redis is never blocked for
-- long (Engine.purge_namespace).
-- KEYS[1] timer zset
-- ARGV[1] chunk size  ARGV[2] job key prefix of the namespace "j/{ns}/"  ARGV[3] meta hash prefix
-- Job and meta keys are built from the prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {jobs deleted, members left}.
local n = tonumber(ARGV[1])
local members = redis.call('ZRANGE', KEYS[1], 0, n - 1)
local deleted = 0
for _, member in ipairs(members) do
    local _, q, _, id, reserved, expiry, wake = unpack_member(member)
    if not wake then
        deleted = deleted + redis.call('DEL', ARGV[2] .. q .. '/' .. id)
    end
    if not expiry and not wake then
        count(ARGV[3] .. q, reserved and 'X' or 'T', -1)
    end
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
return {deleted, redis.call('ZCARD', KEYS[1])}
