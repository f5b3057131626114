-- delete_dead: delete up to `limit` of the oldest dead jobs with their data (a job with a
-- unique_for keeps its id taken that long).
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
    local job = ARGV[2] .. id
    local unique_for = redis.call('HGET', job, 'u')
    redis.call('DEL', job)
    ended(job, unique_for)
    count = count + 1
end
return count
