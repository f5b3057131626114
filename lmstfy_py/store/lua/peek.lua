-- peek (read only): the job a consumer of this queue would get next: the first of its priority
-- set, else the tail of its ready list.
-- KEYS[1] ready list  KEYS[2] priority set
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] most elements to look at in each
-- Returns {id, msgpack data, pttl ms, tries}, or nil when no live job waits.
local n = tonumber(ARGV[2])
local function live(element)
    local tries, id = struct.unpack('<HHc0', element)
    local job = ARGV[1] .. id
    local f = redis.call('HMGET', job, 'd', 'd2', 'K')
    local data = read_data(job, f[1], f[2])
    if data then
        return {id, data, ttl_left(job, f[3]), tries}
    end
end
for _, element in ipairs(redis.call('ZRANGE', KEYS[2], 0, n - 1)) do
    local found = live(element)
    if found then
        return found
    end
end
for i = 1, n do
    local element = redis.call('LINDEX', KEYS[1], -i)
    if not element then
        return nil
    end
    local found = live(element)
    if found then
        return found
    end
end
return nil
