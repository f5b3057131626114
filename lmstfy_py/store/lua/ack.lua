-- ack: delete jobs of one queue and whatever element each waits in (its
-- reservation on the timer, or its ready or dead element), so nothing of them is
-- left behind. One call ACKs one job or a batch (up to 100, checked by the web layer).
-- KEYS[1] timer zset  KEYS[2] ready list  KEYS[3] dead list  KEYS[4..] job hashes
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3..] job ids, in the order of KEYS[4..]
-- Returns how many of the jobs existed (an id given twice counts once).
local found = 0
for i = 4, #KEYS do
    found = found + remove_job(KEYS[i], ARGV[1], ARGV[2], ARGV[i - 1], KEYS[1], KEYS[2], KEYS[3])
end
return found
