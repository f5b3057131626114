-- job_state (read only): one job by id, whatever its state.
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id
-- Returns {msgpack data, pttl ms, tries, state, priority, attempts, last error, died ms,
-- created ms, due ms (delayed or reserved)}, false where a field is absent; nil when there is
-- no such job.
local f = redis.call('HMGET', KEYS[1], 'd', 't', 's', 'p', 'a', 'e', 'k', 'c', 'd2')
if not f[1] then
    return nil
end
local due = false
if f[3] == 'T' or f[3] == 'X' then
    local member = pack_member(ARGV[1], ARGV[2], tonumber(f[2]), ARGV[3], f[3] == 'X')
    due = redis.call('ZSCORE', KEYS[2], member) or false
end
return {read_data(KEYS[1], f[1], f[9]), redis.call('PTTL', KEYS[1]), tonumber(f[2]), f[3] or false,
    f[4] or false, f[5] or false, f[6] or false, f[7] or false, f[8] or false, due}
