-- delete_dead_one: delete one dead job with its data (with a unique_for its id stays taken that
-- long; with a keep it leaves a deleted record).
-- KEYS[1] job hash  KEYS[2] dead list
-- ARGV[1] job id
-- Returns 1, or 0 when the job is not in the dead letter.
if redis.call('HGET', KEYS[1], 's') ~= 'D' or redis.call('LREM', KEYS[2], -1, pack_element(0, ARGV[1])) == 0 then
    return 0
end
local f = redis.call('HMGET', KEYS[1], 'u', 'K')
finish(KEYS[1], ARGV[1], 'L', nil, nil, f[2], f[1])
return 1
