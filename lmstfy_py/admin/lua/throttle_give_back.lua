-- Gives back a unit taken by a request that then failed, if its window is still the open one.
-- KEYS[1]: the counter, a hash {t: when the window opened (ms), n: units taken in it}
-- ARGV[1]: when the window the unit was taken in opened (ms)
local opened = tonumber(redis.call("HGET", KEYS[1], "t"))
if opened == tonumber(ARGV[1]) and tonumber(redis.call("HGET", KEYS[1], "n")) > 0 then
    redis.call("HINCRBY", KEYS[1], "n", -1)
end
return 0
