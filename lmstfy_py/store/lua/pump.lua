-- pump: move due timer members of one namespace: to their ready list while
-- tries remain (delayed jobs, and reserved jobs whose ttr passed), else to the
-- dead letter, where the job stops expiring. Members whose job data has
-- expired are dropped.
-- KEYS[1] timer zset
-- ARGV[1] now ms  ARGV[2] most members to move
-- ARGV[3..6] key prefixes "x/{ns}/" of job hashes, ready lists, dead lists, wake lists
-- Queue keys are built from those prefixes: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {moved to ready, moved to dead, next due ms or -1 when the timer is empty}.
local timer = KEYS[1]
local job_prefix, ready_prefix, dead_prefix, wake_prefix = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local due = redis.call('ZRANGEBYSCORE', timer, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local to_ready, to_dead = 0, 0

for _, member in ipairs(due) do
    redis.call('ZREM', timer, member)
    local _, q, tries, id = struct.unpack('<Hc0Hc0HHc0', member)
    local job = job_prefix .. q .. '/' .. id
    if redis.call('EXISTS', job) == 1 then
        if tries > 0 then
            redis.call('LPUSH', ready_prefix .. q, pack_element(tries, id))
            redis.call('HSET', job, 's', 'R')
            ensure_wake(wake_prefix .. q)
            to_ready = to_ready + 1
        else
            redis.call('LPUSH', dead_prefix .. q, pack_element(0, id))
            redis.call('HSET', job, 's', 'D')
            redis.call('PERSIST', job)
            to_dead = to_dead + 1
        end
    end
end

local head = redis.call('ZRANGE', timer, 0, 0, 'WITHSCORES')
return {to_ready, to_dead, tonumber(head[2]) or -1}
