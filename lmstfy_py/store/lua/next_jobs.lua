-- next_jobs (read only): the next jobs consumers of this queue would get, in delivery order: its
-- priority set first, by its order (higher priority first, FIFO among equals), then its ready
-- list from the tail (the end reserve pops). Elements whose job data expired are skipped, as
-- reserve drops them. Whether the queue is paused does not matter: the order is the same.
-- KEYS[1] ready list  KEYS[2] priority set
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] how many jobs  ARGV[3] most elements
-- to look at in each of the two (bounds the work when many jobs expired: then fewer are listed)
-- Job keys are built from ARGV[1]: they share the keys' hash tag, so the same slot.
-- Returns a flat array, eight per job: id, msgpack data, pttl ms, tries, priority, attempts,
-- last error, created ms (false where absent).
local want, scan = tonumber(ARGV[2]), tonumber(ARGV[3])
local out, got = {}, 0

local function add(element)
    local tries, id = struct.unpack('<HHc0', element)
    local job = ARGV[1] .. id
    local f = redis.call('HMGET', job, 'd', 'p', 'a', 'e', 'c', 'd2', 'K')
    if not f[1] then
        return
    end
    local base = #out
    out[base + 1] = id
    out[base + 2] = read_data(job, f[1], f[6])
    out[base + 3] = ttl_left(job, f[7])
    out[base + 4] = tries
    out[base + 5] = f[2] or false
    out[base + 6] = f[3] or false
    out[base + 7] = f[4] or false
    out[base + 8] = f[5] or false
    got = got + 1
end

local prioritized = redis.call('ZRANGE', KEYS[2], 0, scan - 1)
for _, element in ipairs(prioritized) do
    if got >= want then
        return out
    end
    add(element)
end
if got < want and #prioritized == scan then
    -- More of the priority set may follow: listing the ready list now would put its jobs
    -- before jobs delivered ahead of them. Fewer jobs, in the right order.
    return out
end
local listed = redis.call('LRANGE', KEYS[1], -scan, -1)
for i = #listed, 1, -1 do
    if got >= want then
        break
    end
    add(listed[i])
end
return out
