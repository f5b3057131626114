-- reserve: pop up to `count` ready jobs, queues in the order given, and in the
-- same step record each as reserved on the timer at the ttr deadline, so a job
-- is never outside Redis's records (a consumer that dies gets it redelivered).
-- Elements whose job data has expired (ttl) are dropped here.
-- KEYS[1] timer zset  KEYS[2..n+1] ready lists  KEYS[n+2..2n+1] wake lists
-- ARGV[1] ttr deadline ms  ARGV[2] count  ARGV[3] namespace  ARGV[4] job key prefix "j/{ns}/"
-- ARGV[5..n+4] queue names, in the order of the ready lists
-- Job keys are built from ARGV[4]: they share KEYS[1]'s hash tag, so the same slot.
-- Returns a flat array, five per job: queue, id, msgpack data, pttl ms, remaining tries.
local timer, deadline, want, ns, prefix = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local n = (#KEYS - 1) / 2
local out, got = {}, 0

for i = 1, n do
    local ready, q = KEYS[1 + i], ARGV[4 + i]
    while got < want do
        local element = redis.call('RPOP', ready)
        if not element then
            break
        end
        local tries, id = struct.unpack('<HHc0', element)
        local job = prefix .. q .. '/' .. id
        local data = redis.call('HGET', job, 'd')
        if data then
            local remain = tries - 1
            redis.call('ZADD', timer, deadline, pack_member(ns, q, remain, id))
            redis.call('HSET', job, 's', 'T', 't', remain)
            got = got + 1
            local base = #out
            out[base + 1] = q
            out[base + 2] = id
            out[base + 3] = data
            out[base + 4] = redis.call('PTTL', job)
            out[base + 5] = remain
        end
    end
    -- Whoever takes a wake token and leaves jobs behind puts it back; a token
    -- over an empty list would only wake someone for nothing.
    if redis.call('LLEN', ready) > 0 then
        ensure_wake(KEYS[1 + n + i])
    else
        redis.call('DEL', KEYS[1 + n + i])
    end
end
return out
