-- peek (read only): the job a consumer of this queue would get next.
-- KEYS[1] ready list
-- ARGV[1] job key prefix of the queue "j/{ns}/q/"  ARGV[2] most elements to look at
-- Returns {id, msgpack data, pttl ms, tries}, or nil when no live job waits.
for i = 1, tonumber(ARGV[2]) do
    local element = redis.call('LINDEX', KEYS[1], -i)
    if not element then
        return nil
    end
    local tries, id = struct.unpack('<HHc0', element)
    local job = ARGV[1] .. id
    local data = redis.call('HGET', job, 'd')
    if data then
        return {id, data, redis.call('PTTL', job), tries}
    end
end
return nil
