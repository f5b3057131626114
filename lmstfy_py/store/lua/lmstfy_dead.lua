-- lmstfy_dead: moves one chunk of a dead letter lmstfy left into lmstfy-py's dead letter of the
-- same queue, oldest last as in both layouts (lmstfy's dead jobs are older than lmstfy-py's:
-- they go behind them). Their data moves with them, never expiring, as dead jobs' data.
-- KEYS[1] lmstfy's dead list  KEYS[2] lmstfy-py's dead list
-- ARGV[1] namespace  ARGV[2] queue  ARGV[3] most elements  ARGV[4] now ms
-- Returns {jobs moved, elements left in lmstfy's list}.
local ns, qname = ARGV[1], ARGV[2]
local k = our_keys(ns, qname)
-- The newest first (lmstfy pushes on the left), each appended at the old end of ours.
local moved = pop_each(KEYS[1], 'LPOP', tonumber(ARGV[3]), function(id)
    local job = adopt(ns, qname, id, k)
    if not job then
        return 0
    end
    redis.call('RPUSH', KEYS[2], pack_element(0, id))
    redis.call('HSET', job, 's', 'D', 't', 0, 'k', ARGV[4], 'e', 'lmstfy: dead before the move')
    redis.call('PERSIST', job)
    return 1
end)
return {moved, redis.call('LLEN', KEYS[1])}
