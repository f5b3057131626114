-- schedule_put: register a recurring job, or replace the one of that name (its next tick is
-- reckoned again from now; its last job is remembered).
-- KEYS[1] schedules hash  KEYS[2] next ticks zset
-- ARGV[1] field "<queue>/<name>"  ARGV[2] packed schedule  ARGV[3] first tick ms
-- ARGV[4] the most schedules the namespace may hold, 0: no cap
-- Returns 1 when it is new, 0 when it replaced one, -1 when the namespace is full (nothing stored).
-- The count and the insert are one step: servers registering at once cannot pass the cap.
local cap = tonumber(ARGV[4])
if cap > 0 and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= cap then
  return -1
end
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return created
