-- ack: delete a job and whatever element it waits in (its reservation on the
-- timer, or its ready or dead element), so nothing of it is left behind.
-- KEYS[1] job hash  KEYS[2] timer zset  KEYS[3] ready list  KEYS[4] dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] job id
-- Returns 1 when the job existed, else 0.
return remove_job(KEYS[1], ARGV[1], ARGV[2], ARGV[3], KEYS[2], KEYS[3], KEYS[4])
