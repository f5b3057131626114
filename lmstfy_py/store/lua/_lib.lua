-- Prepended to every script by scripts.py. Element formats match store/keys.py:
-- list element (tries, id) is lmstfy's 'HHc0'; timer member (ns, q, tries, id) is 'Hc0Hc0HHc0'.

local function pack_element(tries, id)
    return struct.pack('<HHc0', tries, #id, id)
end

local function pack_member(ns, q, tries, id)
    return struct.pack('<Hc0Hc0HHc0', #ns, ns, #q, q, tries, #id, id)
end

-- One token is enough: whoever takes it and leaves jobs behind puts it back
-- (see reserve.lua), so wake lists never grow.
local function ensure_wake(wake_key)
    if redis.call('LLEN', wake_key) == 0 then
        redis.call('LPUSH', wake_key, '1')
    end
end

-- Removes every record of a job: the element where it waits (field s says
-- where, field t with which tries it was packed), then its data.
local function remove_job(job_key, ns, q, id, timer_key, ready_key, dead_key)
    local where = redis.call('HMGET', job_key, 's', 't')
    local state, tries = where[1], tonumber(where[2])
    if not state then
        return 0
    end
    if state == 'T' then
        redis.call('ZREM', timer_key, pack_member(ns, q, tries, id))
    elseif state == 'R' then
        redis.call('LREM', ready_key, -1, pack_element(tries, id))
    elseif state == 'D' then
        redis.call('LREM', dead_key, -1, pack_element(tries, id))
    end
    redis.call('DEL', job_key)
    return 1
end
