-- delete_dead: delete up to `limit` of the oldest dead jobs with their data (a job with a
-- unique_for keeps its id taken that long).
-- KEYS[1] dead list
-- ARGV[1] limit  ARGV[2] job key prefix of the queue "j/{ns}/q/"
-- Returns how many dead elements were removed.
return pop_each(KEYS[1], 'RPOP', tonumber(ARGV[1]), function(id)
    local job = ARGV[2] .. id
    local unique_for = redis.call('HGET', job, 'u')
    redis.call('DEL', job)
    ended(job, unique_for)
    return 1
end)
