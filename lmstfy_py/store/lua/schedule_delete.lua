-- schedule_delete: forget a recurring job (the jobs it published stay).
-- KEYS[1] schedules hash  KEYS[2] next ticks zset  KEYS[3] last jobs hash
-- ARGV[1] field "<queue>/<name>"
-- Returns 1 when it existed, else 0.
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
