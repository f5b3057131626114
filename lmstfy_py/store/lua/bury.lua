-- bury: a worker gives up on a job it reserved: to the dead letter now, with `reason` as its
-- last error.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] meta hash  KEYS[4] dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms  ARGV[5] reason ("" = none)
-- Returns {"buried"}, {"missing"} or {"not reserved"}.
local f = redis.call('HMGET', KEYS[1], 's', 't')
if not f[1] then
    return {'missing'}
end
if f[1] ~= 'X' then
    return {'not reserved'}
end
redis.call('ZREM', KEYS[2], pack_member(ARGV[1], ARGV[2], tonumber(f[2]), ARGV[3], true))
count(KEYS[3], 'X', -1)
push_dead(KEYS[1], KEYS[4], ARGV[3], ARGV[5], tonumber(ARGV[4]))
return {'buried'}
