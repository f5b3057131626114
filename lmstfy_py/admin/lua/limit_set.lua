-- Stores one token's limit and bumps the version every process polls, in one atomic step.
-- KEYS[1]: the limits hash (field -> JSON limit)
-- KEYS[2]: the limits version counter
-- ARGV[1]: the field (pool/ns/token), ARGV[2]: the limit as JSON
-- ARGV[3]: "1" to store it only if new (the token has no limit yet)
-- Returns 1 if stored, 0 if refused because a limit exists.
if ARGV[3] == "1" then
    if redis.call("HSETNX", KEYS[1], ARGV[1], ARGV[2]) == 0 then
        return 0
    end
else
    redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
end
redis.call("INCR", KEYS[2])
return 1
