-- reserve: pop up to `count` ready jobs, queues in the order given (the priority set of a queue
-- before its ready list), and in the same step record each as reserved on the timer at the ttr
-- deadline, so a job is never outside Redis's records (a consumer that dies gets it
-- redelivered). Paused queues are skipped. Elements whose job data has expired (ttl) are dropped.
-- KEYS[1] timer zset, then per queue: ready list, priority set, wake list, meta hash
-- ARGV[1] ttr deadline ms  ARGV[2] count  ARGV[3] namespace  ARGV[4] job key prefix "j/{ns}/"
-- ARGV[5] "1" to keep the tries (a pusher's delivery, as lmstfy's: retried until the ttl), else "0"
-- ARGV[6..n+5] queue names, in the order of their keys
-- Job keys are built from ARGV[4]: they share KEYS[1]'s hash tag, so the same slot.
-- Returns a flat array, seven per job: queue, id, msgpack data, pttl ms, remaining tries,
-- attempts (this delivery included), created ms (false for a job stored before it was kept).
local timer, deadline, want, ns, prefix = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local used = ARGV[5] == '1' and 0 or 1
local n = (#KEYS - 1) / 4
local out, got = {}, 0

local function reserve_one(qname, q, element)
    local tries, id = struct.unpack('<HHc0', element)
    local job = prefix .. qname .. '/' .. id
    local fields = redis.call('HMGET', job, 'd', 'c')
    if not fields[1] then
        return
    end
    local remain = tries - used
    redis.call('ZADD', timer, deadline, pack_member(ns, qname, remain, id, true))
    redis.call('HSET', job, 's', 'X', 't', remain)
    local attempts = redis.call('HINCRBY', job, 'a', 1)
    count(q.meta, 'X', 1)
    got = got + 1
    local base = #out
    out[base + 1] = qname
    out[base + 2] = id
    out[base + 3] = fields[1]
    out[base + 4] = redis.call('PTTL', job)
    out[base + 5] = remain
    out[base + 6] = attempts
    out[base + 7] = fields[2] or false
end

for i = 1, n do
    local at = 1 + (i - 1) * 4
    local q = {ready = KEYS[at + 1], prio = KEYS[at + 2], wake = KEYS[at + 3], meta = KEYS[at + 4]}
    local qname = ARGV[5 + i]
    if not paused(q.meta) then
        local prioritized = redis.call('EXISTS', q.prio) == 1
        while got < want do
            local element
            if prioritized then
                element = redis.call('ZPOPMIN', q.prio)[1]
                prioritized = element ~= nil
            end
            element = element or redis.call('RPOP', q.ready)
            if not element then
                break
            end
            reserve_one(qname, q, element)
        end
        -- Whoever takes a wake token and leaves jobs behind puts it back; a token over an
        -- empty queue would only wake someone for nothing.
        if redis.call('LLEN', q.ready) > 0 or redis.call('EXISTS', q.prio) == 1 then
            ensure_wake(q.wake)
        else
            redis.call('DEL', q.wake)
        end
    end
end
return out
