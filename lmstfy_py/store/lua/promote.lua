-- promote: a delayed job is ready now, as if it had come due (SPEC 14): priority and group kept
-- (a job holding its group's slot through a release delay goes to its group's front, freeing
-- the slot; another grouped one to its group's back, in due order), its timer member and counts
-- gone, ready since now; event `promoted`.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3..6] the queue's ready list, priority set, wake
-- list, meta hash  KEYS[7] dead list (release.lua's keys; untouched here)
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id  ARGV[4] now ms
-- Returns {"promoted"}, {"missing"} (no such job) or {"not delayed"} (ready, reserved, dead, or an
-- ended job's record).
local job, timer = KEYS[1], KEYS[2]
local q = {ready = KEYS[3], prio = KEYS[4], wake = KEYS[5], meta = KEYS[6]}
local ns, qname, id, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local f = redis.call('HMGET', job, 's', 't', 'p', 'g', 'h')
if not f[1] then
    return {'missing'}
end
if f[1] ~= 'T' then
    return {'not delayed'}
end
local tries = tonumber(f[2])
local member = pack_member(ns, qname, tries, id, false)
undelayed(q.meta, redis.call('ZSCORE', timer, member))
redis.call('ZREM', timer, member)
push_ready(job, q, tries, id, tonumber(f[3]) or 0, now, f[4], f[5])
if f[4] and f[5] then
    redis.call('HDEL', job, 'h')
    fc().slot_freed(q.meta, f[4])
end
event(job, 'promoted')
return {'promoted'}
