-- publish: store a new job and make it ready now, or schedule it on the timer.
-- KEYS[1] job hash  KEYS[2] ready list  KEYS[3] timer zset  KEYS[4] wake list
-- KEYS[5] queue registry set
-- republish only: KEYS[6] hash of the job it replaces  KEYS[7] dead list
-- ARGV[1] msgpack [body, attributes]  ARGV[2] ttl ms (0 = forever)
-- ARGV[3] due ms (0 = ready now)  ARGV[4] tries  ARGV[5] namespace  ARGV[6] queue
-- ARGV[7] job id  ARGV[8] id of the job it replaces (republish only)
-- Returns 1, or 0 when the job already exists: a retried call does nothing twice.
local job, ready, timer, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ns, q, id, tries, due = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[4]), tonumber(ARGV[3])

if #KEYS == 7 then
    remove_job(KEYS[6], ns, q, ARGV[8], timer, ready, KEYS[7])
end
if redis.call('EXISTS', job) == 1 then
    return 0
end

redis.call('HSET', job, 'd', ARGV[1], 't', tries, 's', due > 0 and 'T' or 'R')
local ttl = tonumber(ARGV[2])
if ttl > 0 then
    redis.call('PEXPIRE', job, ttl)
end
redis.call('SADD', KEYS[5], q)
if due > 0 then
    redis.call('ZADD', timer, due, pack_member(ns, q, tries, id))
else
    redis.call('LPUSH', ready, pack_element(tries, id))
    ensure_wake(wake)
end
return 1
