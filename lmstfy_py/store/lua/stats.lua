-- stats (read only): how many jobs of a queue are in each state, and whether it is paused.
-- KEYS[1] ready list  KEYS[2] priority set  KEYS[3] dead list  KEYS[4] meta hash
-- Returns {ready, delayed, reserved, dead, paused (1 or 0)}.
local meta = redis.call('HMGET', KEYS[4], 'T', 'X', 'paused')
return {
    redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2]),
    tonumber(meta[1]) or 0,
    tonumber(meta[2]) or 0,
    redis.call('LLEN', KEYS[3]),
    meta[3] == '1' and 1 or 0,
}
