-- lmstfy_drop: deletes jobs lmstfy left: their data (an ACK of a job lmstfy delivered, or of one
-- still waiting in lmstfy's layout), or with ARGV[1] = "list" a chunk of one of lmstfy's lists
-- (a destroyed queue's ready list, a purged dead letter) with the data its elements name.
-- KEYS[1..] the keys of the mode  ARGV[1] mode  ARGV[2..] the arguments of the mode:
-- "keys": KEYS lmstfy's job data keys, no arguments; returns how many existed.
-- "members": KEYS lmstfy's timer_set, arguments members of it (a purged namespace's):
-- each leaves the set with its job's data; returns how many jobs had data.
-- "list": KEYS the list, arguments the job data key prefix "j/<ns>/<q>/" and the chunk size;
-- returns {jobs deleted, elements left}.
if ARGV[1] == 'keys' then
    return redis.call('DEL', unpack(KEYS))
elseif ARGV[1] == 'members' then
    local deleted = 0
    for i = 2, #ARGV do
        local ns, qname, _, id = struct.unpack('<Hc0Hc0HHc0', ARGV[i])
        deleted = deleted + redis.call('DEL', 'j/' .. ns .. '/' .. qname .. '/' .. id)
        redis.call('ZREM', KEYS[1], ARGV[i])
    end
    return deleted
end
local deleted = pop_each(KEYS[1], 'RPOP', tonumber(ARGV[3]), function(id)
    return redis.call('DEL', ARGV[2] .. id)
end)
return {deleted, redis.call('LLEN', KEYS[1])}
