-- bury: delete up to `limit` of the oldest dead jobs with their data.
-- KEYS[1] dead list
-- ARGV[1] limit  ARGV[2] job key prefix of the queue "j/{ns}/q/"
-- Returns how many dead elements were removed.
local count = 0
for _ = 1, tonumber(ARGV[1]) do
    local element = redis.call('RPOP', KEYS[1])
    if not element then
        break
    end
    local _, id = struct.unpack('<HHc0', element)
    redis.call('DEL', ARGV[2] .. id)
    count = count + 1
end
return count
