-- peek (read only): the job a consumer of this queue would get next: the first of its priority
-- set, else the tail of its ready list; for a queue with groups (SPEC 14), the first job of the
-- ring's first turn that has one (the turn "" is the jobs without a group).
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
local function first_live(elements)
    for _, element in ipairs(elements) do
        local found = live(element)
        if found then
            return found
        end
    end
end

local function ungrouped()
    local found = first_live(redis.call('ZRANGE', KEYS[2], 0, n - 1))
    for i = 1, n do
        if found then
            return found
        end
        local element = redis.call('LINDEX', KEYS[1], -i)
        if not element then
            return nil
        end
        found = live(element)
    end
    return found
end

-- The ring gr/{ns}/q, built from the ready list's key r/{ns}/q (the same hash tag).
local base = string.sub(KEYS[1], 3)
for _, turn in ipairs(redis.call('ZRANGE', 'gr/' .. base, 0, n - 1)) do
    local found
    if turn == '' then
        found = ungrouped()
    else
        found = first_live(redis.call('ZRANGE', 'gq/' .. base .. '/' .. turn, 0, n - 1))
    end
    if found then
        return found
    end
end
return ungrouped()
