-- touch: a worker keeps its reservation of a job: it now ends at the new deadline.
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] new deadline ms
-- Returns {"touched"}, {"missing"} or {"not reserved"}.
local tries, refusal = reserved_tries(KEYS[1])
if not tries then
    return refusal
end
redis.call('ZADD', KEYS[2], 'XX', ARGV[4], pack_member(ARGV[1], ARGV[2], tries, ARGV[3], true))
event(KEYS[1], 'touched')
return {'touched'}
