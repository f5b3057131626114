-- stats (read only): how many jobs of a queue are in each state, whether it is paused, and what
-- tells since when its longest-waiting ready job is ready (SPEC 14).
-- KEYS[1] ready list  KEYS[2] priority set  KEYS[3] dead list  KEYS[4] meta hash
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"
-- The queue's grouped-ready zset gy/{ns}/q is built from KEYS[4] "n/{ns}/q": the same hash tag.
-- Returns {ready, delayed, reserved, dead, paused (1 or 0), oldest grouped ready ms (false: none),
-- candidates}: candidates, three per ungrouped ready job that may be the longest-waiting (the
-- ready list's oldest, and the first of each priority level present): id, field y (ready since,
-- false: since its publish), field c (created, false: its id tells).
local base = string.sub(KEYS[4], 3)
local meta = redis.call('HMGET', KEYS[4], 'T', 'X', 'paused')
local grouped = redis.call('ZRANGE', 'gy/' .. base, 0, 0, 'WITHSCORES')
local candidates = {}
local function candidate(element)
    local _, id = struct.unpack('<HHc0', element)
    local f = redis.call('HMGET', ARGV[1] .. id, 'y', 'c')
    candidates[#candidates + 1] = id
    candidates[#candidates + 1] = f[1] or false
    candidates[#candidates + 1] = f[2] or false
end
local oldest = redis.call('LINDEX', KEYS[1], -1)
if oldest then
    candidate(oldest)
end
-- Within a priority level, the first member is the one ready longest: at most 256 reads.
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
while first[1] do
    candidate(first[1])
    local level = math.floor(tonumber(first[2]) / PRIORITY_STEP)
    first = redis.call('ZRANGEBYSCORE', KEYS[2], (level + 1) * PRIORITY_STEP, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
end
return {
    redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', 'gy/' .. base),
    tonumber(meta[1]) or 0,
    tonumber(meta[2]) or 0,
    redis.call('LLEN', KEYS[3]),
    meta[3] == '1' and 1 or 0,
    grouped[2] or false,
    candidates,
}
