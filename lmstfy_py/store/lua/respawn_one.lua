-- respawn_one: one dead job back to life, with fresh tries and ttl, ready now or after a delay.
-- KEYS[1] job hash  KEYS[2] dead list  KEYS[3] timer zset  KEYS[4..7] the queue's ready list,
-- priority set, wake list, meta hash  KEYS[8] tombstone of the id
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] ttl ms (0 = forever)  ARGV[5] tries
-- ARGV[6] due ms (0 = ready now)
-- Returns 1, or 0 when the job is not in the dead letter.
local job = KEYS[1]
local q = {ready = KEYS[4], prio = KEYS[5], wake = KEYS[6], meta = KEYS[7]}
if redis.call('HGET', job, 's') ~= 'D' or redis.call('LREM', KEYS[2], -1, pack_element(0, ARGV[3])) == 0 then
    return 0
end
local ttl, tries, due = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local f = redis.call('HMGET', job, 'p', 'u', 'K', 'g')
if ttl > 0 then
    set_ttl(job, ARGV[3], ttl, f[3], f[4])
    if f[2] then
        redis.call('SET', KEYS[8], '1', 'PX', ttl + tonumber(f[2]))
    end
end
if due > 0 then
    push_delayed(job, KEYS[3], q.meta, ARGV[1], ARGV[2], tries, ARGV[3], due)
else
    push_ready(job, q, tries, ARGV[3], tonumber(f[1]) or 0, outcomes().now_ms(), f[4])
end
event(job, 'respawned')
return 1
