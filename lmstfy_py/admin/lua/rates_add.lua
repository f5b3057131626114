-- Adds one process's counts to the rate hash of one pool and minute (admin/rates.py), and (re)sets
-- its expiry in the same step, so no hash is ever left without one.
-- KEYS[1]  the hash (keys.rates: "rt/<pool>/<unix minute>"), fields "p/<ns>/<queue>" (published)
--          and "c/<ns>/<queue>" (consumed)
-- ARGV[1]  its expiry, seconds  ARGV[2..]  field, increment pairs
for i = 2, #ARGV, 2 do
    redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
