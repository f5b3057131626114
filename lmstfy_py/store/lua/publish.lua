-- publish: store a new job and make it ready now, or schedule it on the timer.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] queue registry set  KEYS[4] tombstone of the id
-- KEYS[5..8] the queue's ready list, priority set, wake list, meta hash  KEYS[9] dead list
-- republish only: KEYS[10] hash of the job it replaces
-- ARGV[1] msgpack [body, attributes]  ARGV[2] ttl ms (0 = forever)  ARGV[3] due ms (0 = ready now)
-- ARGV[4] tries  ARGV[5] namespace  ARGV[6] queue  ARGV[7] job id  ARGV[8] now ms
-- ARGV[9] priority  ARGV[10] unique_for ms (0 = none)  ARGV[11] backoff "base:max" ("" = fixed)
-- ARGV[12] id of the job it replaces (republish only)
-- Returns 1, or 0 when a job with this id is alive in the queue or its id is still taken
-- (unique_for): nothing is created, and a retried call does nothing twice.
local job, timer = KEYS[1], KEYS[2]
local q = {timer = timer, ready = KEYS[5], prio = KEYS[6], wake = KEYS[7], meta = KEYS[8], dead = KEYS[9]}
local ns, qname, id = ARGV[5], ARGV[6], ARGV[7]
local ttl, due, tries = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local priority, unique_for = tonumber(ARGV[9]), tonumber(ARGV[10])

if #KEYS == 10 then
    remove_job(KEYS[10], ns, qname, ARGV[12], q)
end
if redis.call('EXISTS', job) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then
    return 0
end

redis.call('HSET', job, 'd', ARGV[1], 'c', ARGV[8])
if priority > 0 then
    redis.call('HSET', job, 'p', priority)
end
if ARGV[11] ~= '' then
    redis.call('HSET', job, 'b', ARGV[11])
end
if ttl > 0 then
    redis.call('PEXPIRE', job, ttl)
end
if unique_for > 0 then
    redis.call('HSET', job, 'u', unique_for)
    if ttl > 0 then -- the id stays taken unique_for after the ttl ends it
        redis.call('SET', KEYS[4], '1', 'PX', ttl + unique_for)
    end
end
redis.call('SADD', KEYS[3], qname)
if due > 0 then
    push_delayed(job, timer, q.meta, ns, qname, tries, id, due)
else
    push_ready(job, q, tries, id, priority)
end
return 1
