-- respawn: move up to `limit` of the oldest dead jobs back to ready with one
-- try and a fresh ttl.
-- KEYS[1] dead list  KEYS[2] ready list  KEYS[3] wake list
-- ARGV[1] limit  ARGV[2] ttl ms (0 = forever)  ARGV[3] job key prefix of the queue "j/{ns}/q/"
-- Returns how many jobs were respawned.
local ttl, count = tonumber(ARGV[2]), 0
for _ = 1, tonumber(ARGV[1]) do
    local element = redis.call('RPOP', KEYS[1])
    if not element then
        break
    end
    local _, id = struct.unpack('<HHc0', element)
    local job = ARGV[3] .. id
    if redis.call('EXISTS', job) == 1 then
        redis.call('HSET', job, 's', 'R', 't', 1)
        if ttl > 0 then
            redis.call('PEXPIRE', job, ttl)
        else
            redis.call('PERSIST', job)
        end
        redis.call('LPUSH', KEYS[2], pack_element(1, id))
        count = count + 1
    end
end
if count > 0 then
    ensure_wake(KEYS[3])
end
return count
