-- delete_dead: delete up to `limit` of the oldest dead jobs with their data (a job with a
-- unique_for keeps its id taken that long; one with a keep leaves a deleted record).
-- KEYS[1] dead list
-- ARGV[1] limit  ARGV[2] job key prefix of the queue "j/{ns}/q/"
-- Returns how many dead elements were removed.
return pop_each(KEYS[1], 'RPOP', tonumber(ARGV[1]), function(id)
    local job = ARGV[2] .. id
    local f = redis.call('HMGET', job, 'u', 'K', 's')
    if f[3] and not is_record(f[3]) then
        finish(job, id, 'L', nil, nil, f[2], f[1])
    end
    return 1
end)
