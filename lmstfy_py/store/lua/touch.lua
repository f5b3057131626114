-- touch: a worker keeps its reservation of a job: it now ends at the new deadline (or when the
-- job's ttl ends, if sooner: _lib.lua's reservation_end).
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] new deadline ms
-- Returns {"touched", when it now ends (ms)}, {"missing"} or {"not reserved"}.
local tries, refusal, group = reserved_tries(KEYS[1])
if not tries then
    return refusal
end
local keep = redis.call('HGET', KEYS[1], 'K')
local deadline = reservation_end(tonumber(ARGV[4]), ttl_left(KEYS[1], keep, false, group), keep, group, outcomes().now_ms)
redis.call('ZADD', KEYS[2], 'XX', deadline, pack_member(ARGV[1], ARGV[2], tries, ARGV[3], true))
event(KEYS[1], 'touched')
return {'touched', deadline}
