-- size (read only): the ready jobs of a queue, priority or not.
-- KEYS[1] ready list  KEYS[2] priority set
return redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
