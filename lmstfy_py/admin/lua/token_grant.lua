-- Looks a token up: whether it exists and, if so, its grant, in one round trip.
-- KEYS[1]: the namespace's tokens hash, KEYS[2]: its grants hash
-- ARGV[1]: the token
-- Returns false for no such token, else its grant ("" for every scope and queue).
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
    return false
end
return redis.call("HGET", KEYS[2], ARGV[1]) or ""
