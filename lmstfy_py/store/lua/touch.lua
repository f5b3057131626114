-- touch: a worker keeps its reservation of a job: it now ends at the new deadline (or when the
-- job's ttl ends, if sooner: _lib.lua's reservation_end).
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] new deadline ms
-- Returns {"touched", when it now ends (ms)}, {"missing"} or {"not reserved"}.
local tries, refusal = reserved_tries(KEYS[1])
if not tries then
    return refusal
end
local f = redis.call('HMGET', KEYS[1], 'K', 'g')
local deadline = reservation_end(tonumber(ARGV[4]), ttl_left(KEYS[1], f[1], false, f[2]), f[1], f[2], outcomes().now_ms)
redis.call('ZADD', KEYS[2], 'XX', deadline, pack_member(ARGV[1], ARGV[2], tries, ARGV[3], true))
event(KEYS[1], 'touched')
return {'touched', deadline}
