-- schedule_put: register a recurring job, or replace the one of that name (its next tick is
-- reckoned again from now; its last job is remembered).
-- KEYS[1] schedules hash  KEYS[2] next ticks zset
-- ARGV[1] field "<queue>/<name>"  ARGV[2] packed schedule  ARGV[3] first tick ms
-- Returns 1 when it is new, 0 when it replaced one.
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return created
