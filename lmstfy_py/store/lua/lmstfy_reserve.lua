-- lmstfy_reserve: a consume's first step on an lmstfy-format pool: pop up to `count` jobs from
-- the ready lists lmstfy left (queues in the order given), moving each into lmstfy-py's layout
-- as it is reserved, in this one step (its id, data, ttl and tries kept), exactly as reserve.lua
-- reserves its own. A paused queue is skipped; an element whose data is gone (ACKed or expired
-- under lmstfy) is dropped, as lmstfy drops it.
-- KEYS[1] lmstfy-py's timer zset  KEYS[2..] per queue: lmstfy's ready list, and lmstfy-py's
-- ready list, priority set, wake list, meta hash
-- ARGV[1] ttr deadline ms  ARGV[2] most jobs (count)  ARGV[3] namespace  ARGV[4] job key prefix "j/{ns}/"
-- ARGV[5] "1" to keep the tries (a pusher's delivery), else "0"  ARGV[6..] queue names
-- Returns reserve.lua's reply: {flat array of seven fields per job, 0}. The queue's max_reserved
-- and rate hold for lmstfy's jobs too; a queue held back is then woken by reserve.lua's step.
local r = {timer = KEYS[1], deadline = ARGV[1], ns = ARGV[3], prefix = ARGV[4], out = {}}
r.used = ARGV[5] == '1' and 0 or 1
local want, got = tonumber(ARGV[2]), 0

for i = 1, (#KEYS - 1) / 5 do
    local at = 1 + (i - 1) * 5
    local legacy = KEYS[at + 1]
    local q = {ready = KEYS[at + 2], prio = KEYS[at + 3], wake = KEYS[at + 4], meta = KEYS[at + 5]}
    local qname = ARGV[5 + i]
    local k = our_keys(r.ns, qname)
    -- The queue's limits hold for lmstfy's jobs too (reserve.lua then holds its consumers back).
    local base = string.sub(q.meta, 3)
    local s, fl = settings_of(base), nil
    local most, took = want - got, 0
    if s.max_reserved > 0 or s.rate > 0 then
        fl = fc()
        most = fl.allowance(s, base, q.meta, most)
    end
    while took < most and not paused(q.meta) do
        local element = redis.call('RPOP', legacy)
        if not element then
            break
        end
        local tries, id = struct.unpack('<HHc0', element)
        if tries > 0 and adopt(r.ns, qname, id, k) and reserve_element(r, qname, q, element) then
            took = took + 1
        end
    end
    got = got + took
    if took > 0 then
        count(q.meta, 'X', took)
    end
    if fl and s.rate > 0 then
        fl.spend(s, base, took)
    end
end
return {r.out, 0}
