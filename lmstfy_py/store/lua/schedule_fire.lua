-- schedule_fire: claim one tick of a recurring job and publish its job, in one step. The claim
-- is a compare-and-set: the tick must still be the schedule's next one and the schedule the one
-- the caller read, so among any number of processes firing the same tick exactly one wins.
-- KEYS[1] schedules hash  KEYS[2] next ticks zset  KEYS[3] last jobs hash
-- KEYS[4] job hash  KEYS[5] timer zset  KEYS[6] queue registry set  KEYS[7] tombstone of the id
-- KEYS[8..11] the queue's ready list, priority set, wake list, meta hash  KEYS[12] the queue's
-- settings hash (its keep)
-- ARGV[1] field "<queue>/<name>"  ARGV[2] the packed schedule read  ARGV[3] the tick claimed (ms)
-- ARGV[4] the next tick (ms)  ARGV[5] "1": publish a job, "0": skip the tick (catch-up "none")
-- ARGV[6] job data  ARGV[7] ttl ms  ARGV[8] tries  ARGV[9] namespace  ARGV[10] queue
-- ARGV[11] job id  ARGV[12] now ms  ARGV[13] priority
-- Returns 1 when it published, 2 when it skipped, 0 when the claim was lost (another process
-- fired the tick, or the schedule was replaced or deleted meanwhile).
local field = ARGV[1]
local tick = redis.call('ZSCORE', KEYS[2], field)
if not tick or tonumber(tick) ~= tonumber(ARGV[3]) or redis.call('HGET', KEYS[1], field) ~= ARGV[2] then
    return 0
end
redis.call('ZADD', KEYS[2], ARGV[4], field)
if ARGV[5] ~= '1' then
    return 2
end
local ns, qname, id = ARGV[9], ARGV[10], ARGV[11]
local j = {key = KEYS[4], timer = KEYS[5], registry = KEYS[6], tombstone = KEYS[7], settings = KEYS[12]}
local q = {timer = KEYS[5], ready = KEYS[8], prio = KEYS[9], wake = KEYS[10], meta = KEYS[11]}
local new = {
    data = ARGV[6], ttl = tonumber(ARGV[7]), due = 0, tries = tonumber(ARGV[8]), created = ARGV[12],
    priority = tonumber(ARGV[13]), unique_for = 0, backoff = '', keep = '',
}
create_job(j, q, ns, qname, id, new)
redis.call('HSET', KEYS[3], field, ARGV[12] .. ' ' .. id)
return 1
