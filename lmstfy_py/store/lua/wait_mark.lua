-- wait_mark: a result() waiter joins (delta 1) or leaves (delta -1) the count of a job's waiters
-- (store/ends.py), which tells the job's ending step to tell them (_lib.lua's tell_waiters).
-- KEYS[1] the job's waiters counter
-- ARGV[1] delta, 1 or -1  ARGV[2] ms the counter lives at least (a joining waiter's wait and a margin)
-- Returns the number of waiters now; the counter is deleted at 0.
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if n <= 0 then
    redis.call('DEL', KEYS[1])
elseif redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return n
