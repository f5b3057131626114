-- destroy: drop one chunk of a queue's ready jobs with their data. The caller
-- repeats it until nothing is left, so Redis is never blocked for long.
-- KEYS[1] ready list  KEYS[2] wake list
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] chunk size
-- Returns {jobs dropped, elements left}.
local n = tonumber(ARGV[2])
local elements = redis.call('LRANGE', KEYS[1], -n, -1)
local dropped = 0
for _, element in ipairs(elements) do
    local _, id = struct.unpack('<HHc0', element)
    dropped = dropped + redis.call('DEL', ARGV[1] .. id)
end
redis.call('LTRIM', KEYS[1], 0, -n - 1)
local left = redis.call('LLEN', KEYS[1])
if left == 0 then
    redis.call('DEL', KEYS[2])
end
return {dropped, left}
