-- bury: a worker gives up on a job it reserved: to the dead letter now, with `reason` as its
-- last error.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] meta hash  KEYS[4] dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms  ARGV[5] reason ("" = none)
-- Returns {"buried", 0, 0, field w (a sampled trace, SPEC 15; false without)}, {"missing"} or
-- {"not reserved"}.
local tries, refusal, trace = take_reservation(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if not tries then
    return refusal
end
push_dead(KEYS[1], KEYS[4], ARGV[3], ARGV[5], tonumber(ARGV[4]))
event(KEYS[1], 'buried', ARGV[5])
return {'buried', 0, 0, trace}
