-- Counts a failed admin login of one client address, or only reads the count, with the time left in
-- its window: a fixed window opened by the address's first failure. One round trip, one key.
-- KEYS[1]: the address's counter (a string), expiring when its window ends
-- ARGV[1]: "1" to count a failure, "0" to only read; ARGV[2]: the window in ms
-- Returns {failures in the open window, ms until it ends (0 when none is open)}.
local failures
if ARGV[1] == "1" then
    failures = redis.call("INCR", KEYS[1])
    -- PTTL, not failures == 1: a counter left without an expiry must not lock its address out for good.
    if redis.call("PTTL", KEYS[1]) < 0 then
        redis.call("PEXPIRE", KEYS[1], ARGV[2])
    end
else
    failures = tonumber(redis.call("GET", KEYS[1]) or 0)
end
local left = redis.call("PTTL", KEYS[1])
if left < 0 then
    left = 0
end
return {failures, left}
