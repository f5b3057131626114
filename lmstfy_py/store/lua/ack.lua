-- ack: delete jobs of one queue and whatever element each waits in (its reservation or delay
-- on the timer, or its ready or dead element), so nothing of them is left behind; a job with a
-- unique_for keeps its id taken that long. One call ACKs one job or a batch (up to 100, checked
-- by the web layer).
-- KEYS[1] timer zset  KEYS[2] ready list  KEYS[3] dead list  KEYS[4] priority set  KEYS[5] meta
-- KEYS[6..] job hashes
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3..] job ids, in the order of KEYS[6..]
-- Returns how many of the jobs existed (an id given twice counts once); when some of those it
-- removed had a sampled trace (SPEC 15), {that count, {id, field w, ...} of each}: an untraced
-- ACK's reply stays one integer.
local q = {timer = KEYS[1], ready = KEYS[2], dead = KEYS[3], prio = KEYS[4], meta = KEYS[5], freed = 0}
local found, traced = 0, {}
for i = 6, #KEYS do
    local removed, trace = remove_job(KEYS[i], ARGV[1], ARGV[2], ARGV[i - 3], q)
    found = found + removed
    if trace then
        traced[#traced + 1] = ARGV[i - 3]
        traced[#traced + 1] = trace
    end
end
if q.freed > 0 then
    count(q.meta, 'X', -q.freed) -- after the removals: a write that may grow memory comes last
end
if #traced == 0 then
    return found
end
return {found, traced}
