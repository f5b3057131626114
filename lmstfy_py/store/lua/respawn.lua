-- respawn: move up to `limit` of the oldest dead jobs back to ready with one try and a fresh ttl.
-- KEYS[1] dead list  KEYS[2..5] the queue's ready list, priority set, wake list, meta hash
-- ARGV[1] limit  ARGV[2] ttl ms (0 = forever)  ARGV[3] job key prefix of the queue "j/{ns}/q/"
-- Returns how many jobs were respawned.
local q = {ready = KEYS[2], prio = KEYS[3], wake = KEYS[4], meta = KEYS[5]}
local ttl, respawned = tonumber(ARGV[2]), 0
for _ = 1, tonumber(ARGV[1]) do
    local element = redis.call('RPOP', KEYS[1])
    if not element then
        break
    end
    local _, id = struct.unpack('<HHc0', element)
    local job = ARGV[3] .. id
    local f = redis.call('HMGET', job, 'p', 'u')
    if redis.call('EXISTS', job) == 1 then
        if ttl > 0 then
            redis.call('PEXPIRE', job, ttl)
            if f[2] then
                redis.call('SET', tombstone_key(job), '1', 'PX', ttl + tonumber(f[2]))
            end
        else
            redis.call('PERSIST', job)
        end
        push_ready(job, q, 1, id, tonumber(f[1]) or 0)
        respawned = respawned + 1
    end
end
return respawned
