-- touch: a worker keeps its reservation of a job: it now ends at the new deadline.
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] new deadline ms
-- Returns {"touched"}, {"missing"} or {"not reserved"}.
local f = redis.call('HMGET', KEYS[1], 's', 't')
if not f[1] then
    return {'missing'}
end
if f[1] ~= 'X' then
    return {'not reserved'}
end
redis.call('ZADD', KEYS[2], 'XX', ARGV[4], pack_member(ARGV[1], ARGV[2], tonumber(f[2]), ARGV[3], true))
return {'touched'}
