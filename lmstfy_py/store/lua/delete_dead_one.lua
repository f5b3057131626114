-- delete_dead_one: delete one dead job with its data (with a unique_for its id stays taken that long).
-- KEYS[1] job hash  KEYS[2] dead list
-- ARGV[1] job id
-- Returns 1, or 0 when the job is not in the dead letter.
if redis.call('HGET', KEYS[1], 's') ~= 'D' or redis.call('LREM', KEYS[2], -1, pack_element(0, ARGV[1])) == 0 then
    return 0
end
local unique_for = redis.call('HGET', KEYS[1], 'u')
redis.call('DEL', KEYS[1])
ended(KEYS[1], unique_for)
return 1
