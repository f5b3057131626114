-- reserve: pop up to `count` ready jobs, queues in the order given (the priority set of a queue
-- before its ready list), and in the same step record each as reserved on the timer at the ttr
-- deadline, so a job is never outside Redis's records (a consumer that dies gets it
-- redelivered). Paused queues are skipped. Elements whose job data has expired (ttl) are dropped.
-- KEYS[1] timer zset  KEYS[2..] per queue: its ready list, priority set, wake list, meta hash
-- ARGV[1] ttr deadline ms  ARGV[2] most jobs (count)  ARGV[3] namespace  ARGV[4] job key prefix "j/{ns}/"
-- ARGV[5] "1" to keep the tries (a pusher's delivery, as lmstfy's: retried until the ttl), else "0"
-- ARGV[6..n+5] queue names, in the order of their keys
-- Job keys are built from ARGV[4]: they share KEYS[1]'s hash tag, so the same slot.
-- Returns {jobs, wake at}: jobs a flat array, seven per job: queue, id, msgpack data, pttl ms,
-- remaining tries, attempts (this delivery included), created ms (false when the job keeps none:
-- its id tells); wake at: when a queue held back by its rate has its next token (its wake-up
-- member on the timer, ms; 0: none), for the Engine to wake its pump then.
local r = {timer = KEYS[1], deadline = ARGV[1], ns = ARGV[3], prefix = ARGV[4], out = {}}
r.used = ARGV[5] == '1' and 0 or 1
local want = tonumber(ARGV[2])
local n = (#KEYS - 1) / 4
local got = 0

for i = 1, n do
    local at = 1 + (i - 1) * 4
    local q = {ready = KEYS[at + 1], prio = KEYS[at + 2], wake = KEYS[at + 3], meta = KEYS[at + 4]}
    got = got + reserve_from_queue(r, ARGV[5 + i], q, want - got)
end
return {r.out, r.wake_at or 0}
