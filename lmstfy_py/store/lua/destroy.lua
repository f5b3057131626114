-- destroy: drop one chunk of a list or sorted set of (tries, id) elements (a queue's ready
-- list or priority set; a dead letter when purging) with the jobs' data. The caller repeats it
-- until nothing is left, so Redis is never blocked for long.
-- KEYS[1] the list or set  KEYS[2] the queue's wake list (deleted once KEYS[1] is empty)
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] chunk size  ARGV[3] kind: "z" for a sorted set,
-- "g" for a group's ready set gq/{ns}/q/<group> (its ids leave gy/{ns}/q, and the group the ring
-- once it is empty: keys built from KEYS[1], the same hash tag)
-- ARGV[4] "1": a job with a keep leaves a deleted record (destroy), "0": none (a purge)
-- Returns {jobs dropped, elements left}.
local n, zset, group = tonumber(ARGV[2]), ARGV[3] ~= 'l', ARGV[3] == 'g'
local base, group_name
if group then
    base, group_name = string.match(KEYS[1], '^gq/({[^}]*}/[^/]*)/(.*)$')
end
local elements
if zset then
    elements = redis.call('ZRANGE', KEYS[1], 0, n - 1)
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
else
    elements = redis.call('LRANGE', KEYS[1], -n, -1)
    redis.call('LTRIM', KEYS[1], 0, -n - 1)
end
local dropped = 0
for _, element in ipairs(elements) do
    local _, id = struct.unpack('<HHc0', element)
    local job = ARGV[1] .. id
    local f = redis.call('HMGET', job, 'u', 'K', 's', 'g')
    if group then
        redis.call('ZREM', 'gy/' .. base, id)
    end
    -- A record is not this element's job: the element outlived its job (ttl), whose id's next job ended.
    if f[3] and ARGV[4] == '1' and not is_record(f[3]) then
        finish(job, id, 'L', nil, nil, f[2], f[1], f[4])
        dropped = dropped + 1
    elseif not is_record(f[3]) then
        dropped = dropped + redis.call('DEL', job)
        ended(job, f[1])
    end
end
local left = zset and redis.call('ZCARD', KEYS[1]) or redis.call('LLEN', KEYS[1])
if left == 0 then
    redis.call('DEL', KEYS[2])
    if group then
        redis.call('ZREM', 'gr/' .. base, group_name)
        fc().close_ring(base, 'n/' .. base)
    end
end
return {dropped, left}
