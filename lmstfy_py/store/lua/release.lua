-- release: a worker ends its reservation of a job without ACK. The job is ready again after
-- `delay` (given, or else its backoff: at once for fixed, as when its ttr passes), or, with no
-- tries left, goes to the dead letter. `reason` becomes its last error. An untried release (a
-- worker gives back a job it never started) returns the try and the attempt the reservation
-- took, and without a delay makes the job ready at once whatever its backoff. A grouped job made
-- ready goes to the front of its group, freeing its slot; one released with a delay keeps its
-- slot until it comes due (field h).
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3..6] the queue's ready list, priority set, wake
-- list, meta hash  KEYS[7] dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms  ARGV[5] delay ms ("" = its
-- backoff)  ARGV[6] reason ("" = none)  ARGV[7] "1" = untried
-- Returns {"released", due ms, remaining tries, field w}, {"buried", 0, 0, field w}, {"missing"} or
-- {"not reserved"} (field w: a sampled trace, SPEC 15; false without).
local job, timer = KEYS[1], KEYS[2]
local q = {ready = KEYS[3], prio = KEYS[4], wake = KEYS[5], meta = KEYS[6]}
local ns, qname, id, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local tries, refusal, group, trace = reserved_tries(job)
if not tries then
    return refusal
end
local f = redis.call('HMGET', job, 'p', 'b', 'a')
redis.call('ZREM', timer, pack_member(ns, qname, tries, id, true))
count(q.meta, 'X', -1)
local untried = ARGV[7] == '1'
if untried then
    tries = tries + 1
    if (tonumber(f[3]) or 0) > 0 then
        f[3] = redis.call('HINCRBY', job, 'a', -1)
    end
end
if ARGV[6] ~= '' then
    redis.call('HSET', job, 'e', ARGV[6])
end
if tries == 0 then
    push_dead(job, KEYS[7], id, nil, now)
    if group then
        fc().slot_freed(q.meta, group)
    end
    event(job, 'buried', redis.call('HGET', job, 'e') or '')
    return {'buried', 0, 0, trace}
end
local delay = tonumber(ARGV[5]) or (untried and 0) or backoff_ms(f[2], tonumber(f[3]) or 1)
if delay > 0 then
    push_delayed(job, timer, q.meta, ns, qname, tries, id, now + delay)
    if group then -- it keeps its slot while it waits: its group waits too
        redis.call('HSET', job, 'h', 1)
    end
else
    push_ready(job, q, tries, id, tonumber(f[1]) or 0, now, group, true)
    if group then
        fc().slot_freed(q.meta, group)
    end
end
event(job, 'released', ARGV[6])
return {'released', now + delay, tries, trace}
