-- peek_job (read only): one job by id, whatever its state.
-- KEYS[1] job hash
-- Returns {msgpack data, pttl ms, tries}, or nil when there is no such job.
local fields = redis.call('HMGET', KEYS[1], 'd', 't')
if not fields[1] then
    return nil
end
return {fields[1], redis.call('PTTL', KEYS[1]), tonumber(fields[2])}
