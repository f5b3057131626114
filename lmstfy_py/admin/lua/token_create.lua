-- Stores a new token with its grant (scopes and queue patterns) in one atomic step: a scoped token
-- is never briefly unrestricted, and no grant is ever left without its token.
-- KEYS[1]: the namespace's tokens hash (lmstfy's: token -> description)
-- KEYS[2]: the namespace's grants hash (token -> JSON grant)
-- ARGV[1]: the token, ARGV[2]: its description, ARGV[3]: its grant ("" for every scope and queue)
-- Returns 1 if stored, 0 if the token exists.
if redis.call("HSETNX", KEYS[1], ARGV[1], ARGV[2]) == 0 then
    return 0
end
if ARGV[3] == "" then
    redis.call("HDEL", KEYS[2], ARGV[1]) -- a grant its token outlived (lmstfy deleted the token)
else
    redis.call("HSET", KEYS[2], ARGV[1], ARGV[3])
end
return 1
