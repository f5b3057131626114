-- respawn: move up to `limit` of the oldest dead jobs back to ready with one try and a fresh ttl.
-- KEYS[1] dead list  KEYS[2..5] the queue's ready list, priority set, wake list, meta hash
-- ARGV[1] limit  ARGV[2] ttl ms (0 = forever)  ARGV[3] job key prefix of the queue "j/{ns}/q/"
-- Returns how many jobs were respawned.
local q = {ready = KEYS[2], prio = KEYS[3], wake = KEYS[4], meta = KEYS[5]}
local ttl = tonumber(ARGV[2])
local now = outcomes().now_ms()
return pop_each(KEYS[1], 'RPOP', tonumber(ARGV[1]), function(id)
    local job = ARGV[3] .. id
    local f = redis.call('HMGET', job, 'p', 'u', 'K', 'g')
    if redis.call('EXISTS', job) == 0 then
        return 0
    end
    if ttl > 0 then
        set_ttl(job, id, ttl, f[3], f[4])
        if f[2] then
            redis.call('SET', tombstone_key(job), '1', 'PX', ttl + tonumber(f[2]))
        end
    else
        redis.call('PERSIST', job)
    end
    push_ready(job, q, 1, id, tonumber(f[1]) or 0, now, f[4])
    event(job, 'respawned')
    return 1
end)
