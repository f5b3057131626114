-- complete: a worker ACKs a job it reserved and gives its result (SPEC 13): as ack.lua, and the
-- job stays as a completed record holding `result` for its keep (or is only told to its
-- waiters, with no keep).
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] meta hash
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms  ARGV[5] result
-- Returns {"completed", 0, 0, field w (a sampled trace, SPEC 15; false without)}, {"missing"} or
-- {"not reserved"} (also for an ended job's record).
local tries, refusal, trace = take_reservation(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if not tries then
    return refusal
end
local f = redis.call('HMGET', KEYS[1], 'K', 'u', 'g')
finish(KEYS[1], ARGV[3], 'C', tonumber(ARGV[4]), ARGV[5], f[1], f[2], f[3])
return {'completed', 0, 0, trace}
