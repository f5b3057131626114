-- pump: move due timer members of one namespace. A delayed job becomes ready. A reservation
-- whose ttr passed makes its job ready again while tries remain (after its backoff when that is
-- exponential: it is then delayed until then), else puts it in the dead letter, where the job
-- stops expiring. Members whose job data has expired (or is an ended job's record) are dropped.
-- An expiry member (a job with a keep whose ttl passed, set_ttl) ends its job as expired,
-- leaving its record, unless the job is no longer that one (dead, ended, or given a new ttl). A
-- wake-up member (a queue held back by its rate, lua/_lib.lua's fc()) wakes its queue and counts
-- as a job made ready (for the handover; in the first count returned). When jobs became ready, it then
-- hands them over to this process's waiting consumes in the same step: for each waiter, in the
-- order given, it reserves as reserve.lua does (reserve_from_queue), so the waiter answers them
-- without a wake token and a reserve of its own.
-- KEYS[1] timer zset  KEYS[2..] per queue of each waiter: its ready list, priority set, wake
-- list, meta hash
-- ARGV[1] now ms  ARGV[2] most members to move
-- ARGV[3..8] key prefixes "x/{ns}/" of job hashes, ready lists, dead lists, wake lists,
-- priority sets, meta hashes  ARGV[9] namespace
-- ARGV[10..] waiters, each as: ttr deadline ms, most jobs, "1" to keep the tries, how many
-- queues, the queue names (their keys in KEYS, in the same order)
-- Queue keys are built from those prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {moved to ready, moved to dead, next due ms or -1 when the timer is empty, handed, died},
-- handed: per waiter what reserve.lua answers (seven fields per job; empty for none); died: queue,
-- id and field w of each job that died here with a sampled trace (SPEC 15).
local timer, now = KEYS[1], tonumber(ARGV[1])
local job_prefix, ready_prefix, dead_prefix, wake_prefix, prio_prefix, meta_prefix =
    ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local due = redis.call('ZRANGEBYSCORE', timer, '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local to_ready, to_dead, died = 0, 0, {}

-- An expiry member's job ends as expired, when it is still the job whose ttl passed: alive, with
-- no more than its keep (and a grouped job's grace) left to live (a respawn with no ttl made it
-- live for ever). Without a keep it leaves no record (lmstfy's end); a grouped one frees its slot.
local function expire(job, ns, qname, id)
    local f = redis.call('HMGET', job, 's', 'K', 'g')
    local keep, pttl = tonumber(f[2]) or 0, redis.call('PTTL', job)
    local outlives = keep * 1000 + (f[3] and 60000 or 0) -- the ttl left is then 0
    if not f[1] or f[1] == 'D' or is_record(f[1]) or outlives <= 0 or pttl < 0 or pttl > outlives + 1000 then
        return
    end
    local q = {timer = timer, ready = ready_prefix .. qname, dead = dead_prefix .. qname, prio = prio_prefix .. qname,
        meta = meta_prefix .. qname}
    remove_job(job, ns, qname, id, q, 'E', now)
end

for at = 1, #due, 2 do
    local member, score = due[at], due[at + 1]
    -- 0: an expiry removed it already (its job's reservation or delay), with its count.
    local moved = redis.call('ZREM', timer, member) == 1
    local ns, qname, tries, id, reserved, expiry, wake = unpack_member(member)
    local job = job_prefix .. qname .. '/' .. id
    local meta = meta_prefix .. qname
    if moved and expiry then
        expire(job, ns, qname, id)
        moved = false
    elseif moved and wake then
        -- A queue held back by its rate has its next token: wake it, and hand it to this
        -- process's waiters as if a job had come due (reserve_from_queue checks the limits again).
        if not paused(meta) then
            ensure_wake(wake_prefix .. qname)
            to_ready = to_ready + 1
        end
        moved = false
    elseif moved and reserved then
        count(meta, 'X', -1)
    elseif moved then
        undelayed(meta, score)
    end
    local fields = moved and redis.call('HMGET', job, 's', 'p', 'b', 'a', 'g', 'h', 'w') or {}
    -- A record, or a job in another state, is not this member's job: the member outlived its job
    -- (ttl), and the id names the next job of that id (in_state).
    if fields[1] and in_state(fields[1], reserved and 'X' or 'T') then
        local later = reserved and backoff_ms(fields[3], tonumber(fields[4]) or 1) or 0
        local group = fields[5]
        -- A grouped job whose reservation ended, or that held its slot through a delay, frees the
        -- slot unless it waits out a backoff now (its group waits too: field h).
        local frees = group and (reserved or fields[6])
        if tries == 0 then
            push_dead(job, dead_prefix .. qname, id, 'ttr passed with no tries left', now)
            event(job, 'dead', 'ttr passed with no tries left')
            to_dead = to_dead + 1
            if fields[7] then
                died[#died + 1] = qname
                died[#died + 1] = id
                died[#died + 1] = fields[7]
            end
        elseif later > 0 then
            push_delayed(job, timer, meta, ns, qname, tries, id, now + later)
            if group then
                redis.call('HSET', job, 'h', 1)
                frees = false
            end
        else
            local q = {ready = ready_prefix .. qname, prio = prio_prefix .. qname, wake = wake_prefix .. qname, meta = meta}
            push_ready(job, q, tries, id, tonumber(fields[2]) or 0, now, group, frees)
            to_ready = to_ready + 1
        end
        if frees then
            redis.call('HDEL', job, 'h')
            fc().slot_freed(meta, group)
        end
        -- A reservation whose ttr passed is released (ready again at once or after its backoff,
        -- then told as ready); a delayed job is ready now.
        if tries > 0 then
            event(job, reserved and 'released' or 'ready', reserved and 'ttr passed' or nil)
        end
    end
end

local handed, at, key_at = {}, 10, 2
while to_ready > 0 and at <= #ARGV do
    local r = {timer = timer, deadline = ARGV[at], ns = ARGV[9], prefix = job_prefix, out = {}}
    r.used = ARGV[at + 2] == '1' and 0 or 1
    local want, n, got = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 3]), 0
    for i = 1, n do
        local k = key_at + (i - 1) * 4
        local q = {ready = KEYS[k], prio = KEYS[k + 1], wake = KEYS[k + 2], meta = KEYS[k + 3]}
        got = got + reserve_from_queue(r, ARGV[at + 3 + i], q, want - got)
    end
    handed[#handed + 1] = r.out
    at, key_at = at + 4 + n, key_at + 4 * n
end

-- After the handover: its reservations are on the timer too.
local head = redis.call('ZRANGE', timer, 0, 0, 'WITHSCORES')
return {to_ready, to_dead, tonumber(head[2]) or -1, handed, died}
