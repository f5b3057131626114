-- size (read only): the ready jobs of a queue, priority or not, grouped or not.
-- KEYS[1] ready list  KEYS[2] priority set
-- The grouped-ready zset gy/{ns}/q is built from KEYS[1] "r/{ns}/q": the same hash tag.
return redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', 'gy/' .. string.sub(KEYS[1], 3))
