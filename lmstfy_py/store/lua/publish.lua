-- publish: store a new job and make it ready now, or schedule it on the timer.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] queue registry set  KEYS[4] tombstone of the id
-- KEYS[5..8] the queue's ready list, priority set, wake list, meta hash  KEYS[9] dead list
-- KEYS[10] the queue's settings hash  KEYS[11..] republish only: the hash of the job it replaces
-- ARGV[1] job data (store/jobdata.py)  ARGV[2] ttl ms (0 = forever)  ARGV[3] due ms (0 = ready now)
-- ARGV[4] tries  ARGV[5] namespace  ARGV[6] queue  ARGV[7] job id
-- ARGV[8] created ms to keep in the job, 0 when its id tells (one the engine made: field c left out)
-- ARGV[9] priority  ARGV[10] unique_for ms (0 = none)  ARGV[11] backoff "base:max" ("" = fixed)
-- ARGV[12] keep s of its record once it ended ("" = the queue's keep setting)
-- ARGV[13] its group ("" = none; SPEC 14)
-- ARGV[14] traceparent and tracestate for field w ("" = none: kept only for a sampled trace; SPEC 15)
-- ARGV[15] a waiting consume's ttr deadline ms (0 = none)  ARGV[16] its most jobs
-- ARGV[17] "1" to keep the tries (a pusher's consume)
-- ARGV[18..] id of the job it replaces (republish only; it ends completed)
-- Returns 1 (2: it has a keep and a ttl, which the pump ends, see _lib.lua's set_ttl), or 0 when
-- a job with this id is alive in the queue or its id is still taken (unique_for): nothing is
-- created, and a retried call does nothing twice. When the job it replaced had a sampled trace
-- (SPEC 15), or a waiting consume was named: {that number, the replaced job's field w or false,
-- what reserve.lua answers for the waiter (its jobs, seven fields each; wake at)}.
-- The waiter is one of the publishing process's long-polls on this queue alone (store/handover.py):
-- a job made ready now is reserved for it in the same step, as reserve.lua would (the queue's
-- oldest ready job first, its limits and pause kept), so that it answers with no wake token, no
-- BRPOP return and no reserve of its own. When the job is the only one ready in a queue without
-- groups, limits or pause (most handovers), it is stored reserved at once (_lib.lua's
-- takes_new_job, hand_new_job): no ready element, wake token or pop to undo again.
local q = {timer = KEYS[2], ready = KEYS[5], prio = KEYS[6], wake = KEYS[7], meta = KEYS[8], dead = KEYS[9]}
local ns, qname, id = ARGV[5], ARGV[6], ARGV[7]
local replaced -- the replaced job's field w
if #KEYS == 11 then
    replaced = select(2, remove_job(KEYS[11], ns, qname, ARGV[18], q))
end
local j = {key = KEYS[1], tombstone = KEYS[4], registry = KEYS[3], timer = KEYS[2], settings = KEYS[10]}
local new = {
    data = ARGV[1], ttl = tonumber(ARGV[2]), due = tonumber(ARGV[3]), tries = tonumber(ARGV[4]),
    created = ARGV[8], priority = tonumber(ARGV[9]), unique_for = tonumber(ARGV[10]), backoff = ARGV[11],
    keep = ARGV[12], group = ARGV[13] ~= '' and ARGV[13] or nil, trace = ARGV[14] ~= '' and ARGV[14] or nil,
}
local deadline = tonumber(ARGV[15])
local r -- the waiting consume's reservation
if deadline > 0 and new.due == 0 then
    -- The job keys' prefix "j/{ns}/", from this job's "j/{ns}/<queue>/<id>".
    local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #qname - #id - 1)
    r = {timer = KEYS[2], deadline = deadline, ns = ns, prefix = prefix, out = {}}
    r.used = ARGV[17] == '1' and 0 or 1
    if takes_new_job(q, new) then -- stored reserved: no ready element, wake token or pop of its own
        new.reserved = new.tries - r.used
    end
end
local made = create_job(j, q, ns, qname, id, new)
if made > 0 and r then
    if new.reserved then
        hand_new_job(r, q, qname, id, new)
    else
        reserve_from_queue(r, qname, q, tonumber(ARGV[16]))
    end
    return {made, replaced or false, {r.out, r.wake_at or 0}}
end
if replaced then
    return {made, replaced}
end
return made
