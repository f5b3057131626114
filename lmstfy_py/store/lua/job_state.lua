-- job_state (read only): one job by id, whatever its state; also an ended job's record.
-- KEYS[1] job hash  KEYS[2] timer zset
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id
-- Returns {msgpack data, pttl ms, tries, state, priority, attempts, last error, died ms,
-- created ms, due ms (delayed or reserved), result (a completed record's), finished ms (a
-- record's)}, false where a field is absent; nil when there is no such job.
return outcomes().state_reply(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
