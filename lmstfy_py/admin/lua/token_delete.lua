-- Deletes tokens and their grants in one atomic step.
-- KEYS[1]: the namespace's tokens hash, KEYS[2]: its grants hash
-- ARGV[1..]: the tokens to delete (at most a chunk: Lua's unpack() has a stack limit)
-- Returns how many tokens there were.
redis.call("HDEL", KEYS[2], unpack(ARGV))
return redis.call("HDEL", KEYS[1], unpack(ARGV))
