-- lmstfy_pump: lmstfy's timer pump, into lmstfy-py's layout: the members of lmstfy's timer_set
-- due by now (delayed jobs, and reservations lmstfy made that ended without an ACK) move, with
-- their job, to lmstfy-py's ready list (tries left > 0) or dead letter (none left), as lmstfy's
-- own pump would move them to its lists; a member whose job data is gone is dropped. A still
-- running lmstfy pumps the same set: each member is moved by whoever takes it first, once.
-- KEYS[1] lmstfy's timer_set
-- ARGV[1] now, unix seconds (lmstfy's scores)  ARGV[2] most members to move  ARGV[3] now ms
-- Returns {members moved, score of the next due member or -1}.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
    local ns, qname, tries, id = struct.unpack('<Hc0Hc0HHc0', member)
    local k = our_keys(ns, qname)
    local job = adopt(ns, qname, id, k)
    if job then
        if tries > 0 then
            push_ready(job, k, tries, id, 0, tonumber(ARGV[3]))
        else
            push_dead(job, k.dead, id, 'lmstfy: no tries left', tonumber(ARGV[3]))
        end
        redis.call('SADD', 'nss', ns) -- store/keys.py's NAMESPACES: lmstfy-py's pump now sweeps it
    end
end
if #due > 0 then
    redis.call('ZREM', KEYS[1], unpack(due))
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#due, head[2] or '-1'}
