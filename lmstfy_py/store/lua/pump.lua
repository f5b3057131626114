-- pump: move due timer members of one namespace. A delayed job becomes ready. A reservation
-- whose ttr passed makes its job ready again while tries remain (after its backoff when that is
-- exponential: it is then delayed until then), else puts it in the dead letter, where the job
-- stops expiring. Members whose job data has expired are dropped.
-- KEYS[1] timer zset
-- ARGV[1] now ms  ARGV[2] most members to move
-- ARGV[3..8] key prefixes "x/{ns}/" of job hashes, ready lists, dead lists, wake lists,
-- priority sets, meta hashes
-- Queue keys are built from those prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {moved to ready, moved to dead, next due ms or -1 when the timer is empty}.
local timer, now = KEYS[1], tonumber(ARGV[1])
local job_prefix, ready_prefix, dead_prefix, wake_prefix, prio_prefix, meta_prefix =
    ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local due = redis.call('ZRANGEBYSCORE', timer, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local to_ready, to_dead = 0, 0

for _, member in ipairs(due) do
    redis.call('ZREM', timer, member)
    local ns, qname, tries, id, reserved = unpack_member(member)
    local job = job_prefix .. qname .. '/' .. id
    local meta = meta_prefix .. qname
    count(meta, reserved and 'X' or 'T', -1)
    local fields = redis.call('HMGET', job, 's', 'p', 'b', 'a')
    if fields[1] then
        local later = reserved and backoff_ms(fields[3], tonumber(fields[4]) or 1) or 0
        if tries == 0 then
            push_dead(job, dead_prefix .. qname, id, 'ttr passed with no tries left', now)
            to_dead = to_dead + 1
        elseif later > 0 then
            push_delayed(job, timer, meta, ns, qname, tries, id, now + later)
        else
            local q = {ready = ready_prefix .. qname, prio = prio_prefix .. qname, wake = wake_prefix .. qname, meta = meta}
            push_ready(job, q, tries, id, tonumber(fields[2]) or 0)
            to_ready = to_ready + 1
        end
    end
end

local head = redis.call('ZRANGE', timer, 0, 0, 'WITHSCORES')
return {to_ready, to_dead, tonumber(head[2]) or -1}
