-- bury: a worker gives up on a job it reserved: to the dead letter now, with `reason` as its
-- last error.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] meta hash  KEYS[4] dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms  ARGV[5] reason ("" = none)
-- Returns {"buried"}, {"missing"} or {"not reserved"}.
local tries, refusal = reserved_tries(KEYS[1])
if not tries then
    return refusal
end
redis.call('ZREM', KEYS[2], pack_member(ARGV[1], ARGV[2], tries, ARGV[3], true))
count(KEYS[3], 'X', -1)
push_dead(KEYS[1], KEYS[4], ARGV[3], ARGV[5], tonumber(ARGV[4]))
return {'buried'}
