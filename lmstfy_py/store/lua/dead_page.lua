-- dead_page (read only): a page of a queue's dead letter, oldest first.
-- KEYS[1] dead list
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] page size  ARGV[3] the id after which
-- the page starts ("" = the oldest)
-- Returns {more (1 or 0), then five per job: id, msgpack data, attempts, last error, died ms}
-- (false where absent), or {-1} when ARGV[3] is not in the dead letter.
local dead, limit = KEYS[1], tonumber(ARGV[2])
local start = redis.call('LLEN', dead) - 1 -- the oldest is the tail
if ARGV[3] ~= '' then
    local at = redis.call('LPOS', dead, pack_element(0, ARGV[3]), 'RANK', -1)
    if not at then
        return {-1}
    end
    start = at - 1
end
local out = {start - limit >= 0 and 1 or 0}
if start < 0 then
    return out
end
local elements = redis.call('LRANGE', dead, math.max(0, start - limit + 1), start)
for i = #elements, 1, -1 do
    local _, id = struct.unpack('<HHc0', elements[i])
    local job = ARGV[1] .. id
    local f = redis.call('HMGET', job, 'd', 'a', 'e', 'k', 'd2')
    local base = #out
    out[base + 1] = id
    out[base + 2] = read_data(job, f[1], f[5]) or false
    out[base + 3] = f[2] or false
    out[base + 4] = f[3] or false
    out[base + 5] = f[4] or false
end
return out
