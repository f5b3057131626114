-- Deletes limits and, if any existed, bumps the version every process polls, in one atomic step.
-- KEYS[1]: the limits hash (field -> JSON limit)
-- KEYS[2]: the limits version counter
-- ARGV[1..]: the fields (pool/ns/token) to delete, at least one
-- Returns how many existed.
local deleted = redis.call("HDEL", KEYS[1], unpack(ARGV))
if deleted > 0 then
    redis.call("INCR", KEYS[2])
end
return deleted
