-- Takes one unit of a token's read or write limit, if its current window has one left.
-- A window opens at the first unit taken and lasts the limit's interval (lmstfy's semantics); a
-- changed interval applies to the open window at once. Times come from Redis's clock, which every
-- server process shares.
-- KEYS[1]: the counter, a hash {t: when the window opened (ms), n: units taken in it};
--          it expires when its window ends
-- ARGV[1]: units per window (>= 1), ARGV[2]: the interval in ms
-- Returns the window's opening time (its id, for giving the unit back), or false when none is left.
local per_window, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
local clock = redis.call("TIME")
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local opened = tonumber(redis.call("HGET", KEYS[1], "t"))
if opened == nil or now >= opened + interval then
    redis.call("HSET", KEYS[1], "t", now, "n", 1)
    redis.call("PEXPIREAT", KEYS[1], now + interval)
    return now
end
redis.call("PEXPIREAT", KEYS[1], opened + interval)
if tonumber(redis.call("HGET", KEYS[1], "n")) >= per_window then
    return false
end
redis.call("HINCRBY", KEYS[1], "n", 1)
return opened
