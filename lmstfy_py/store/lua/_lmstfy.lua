-- Prepended (after _lib.lua) to the lmstfy_*.lua scripts: serving the jobs lmstfy left in a
-- Redis (docs/LMSTFY_LAYOUT.md) by moving each one into lmstfy-py's layout in the step that
-- touches it. lmstfy's keys carry no hash tag: these scripts run on lmstfy-format pools only,
-- which are never a Redis Cluster (lmstfy never ran on one), so touching them with a
-- namespace's keys is safe.
--
-- lmstfy's keys: j/<ns>/<q>/<id> (string: the job's data, EXPIRE = its ttl), q/<ns>/<q> (ready
-- list) and d/<ns>/<q> (dead letter) of 'HHc0' (tries, id) elements, the pool's timer_set zset of
-- 'Hc0Hc0HHc0' members scored in unix seconds.

-- lmstfy-py's keys of a namespace and queue, spelled as store/keys.py spells them.
local function our_keys(ns, qname)
    local tag = '{' .. ns .. '}/'
    return {
        prefix = 'j/' .. tag,
        timer = 't/{' .. ns .. '}',
        registry = 'qs/{' .. ns .. '}',
        ready = 'r/' .. tag .. qname,
        prio = 'rp/' .. tag .. qname,
        wake = 'w/' .. tag .. qname,
        meta = 'n/' .. tag .. qname,
        dead = 'd/' .. tag .. qname,
    }
end

-- msgpack, as lmstfy-py's job data is: [body (bin), attributes (map of str, or nil)].
local function mp_sized(n, fix, fix_max, c8, c16, c32)
    if fix and n <= fix_max then
        return string.char(fix + n)
    elseif c8 and n < 256 then
        return string.char(c8, n)
    elseif n < 65536 then
        return string.char(c16) .. struct.pack('>H', n)
    end
    return string.char(c32) .. struct.pack('>I4', n)
end

local function mp_str(s)
    return mp_sized(#s, 0xa0, 31, 0xd9, 0xda, 0xdb) .. s
end

local function job_data(body, attributes)
    local packed = string.char(0x92) .. mp_sized(#body, nil, 0, 0xc4, 0xc5, 0xc6) .. body
    if not attributes then
        return packed .. string.char(0xc0)
    end
    local names = {}
    for name in pairs(attributes) do
        names[#names + 1] = name
    end
    table.sort(names)
    packed = packed .. mp_sized(#names, 0x80, 15, nil, 0xde, 0xdf)
    for _, name in ipairs(names) do
        packed = packed .. mp_str(name) .. mp_str(tostring(attributes[name]))
    end
    return packed
end

local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local B64_VALUE -- filled at the first decode: a function library's top level, run when Redis
-- loads it (store/scripts.py), may call no library function (string.byte) yet

local function base64_decode(text)
    if not B64_VALUE then
        B64_VALUE = {}
        for i = 1, 64 do
            B64_VALUE[string.byte(B64, i)] = i - 1
        end
    end
    local out, bits, nbits = {}, 0, 0
    for i = 1, #text do
        local v = B64_VALUE[string.byte(text, i)]
        if v then
            bits = bits * 64 + v
            nbits = nbits + 6
            if nbits >= 8 then
                nbits = nbits - 8
                local byte = math.floor(bits / 2 ^ nbits)
                out[#out + 1] = string.char(byte)
                bits = bits - byte * 2 ^ nbits
            end
        end
    end
    return table.concat(out)
end

-- lmstfy's data of a job as lmstfy-py's: the raw body for a 26-character id (lmstfy 1.0.10); for
-- a versioned id (a digit before the 26 characters, a later lmstfy's Enable-Job-Version), its
-- JSON envelope {"body": base64, "attributes": {...}}.
local function lmstfy_job_data(id, raw)
    if #id ~= 27 then
        return job_data(raw, nil)
    end
    local ok, envelope = pcall(cjson.decode, raw)
    if not ok or type(envelope) ~= 'table' then
        return job_data(raw, nil)
    end
    local attributes = envelope['attributes']
    if type(attributes) ~= 'table' then
        attributes = {}
    end
    local body = envelope['body']
    return job_data(type(body) == 'string' and base64_decode(body) or '', attributes)
end

-- Moves a job's data from lmstfy's key into lmstfy-py's job hash, keeping its ttl (the id keeps
-- its time, so elapsed_ms is counted from lmstfy's publish). Returns lmstfy-py's job key, or
-- nil when lmstfy's data is gone (ACKed, or expired): the element that named it is stale.
local function adopt(ns, qname, id, k)
    local legacy = 'j/' .. ns .. '/' .. qname .. '/' .. id
    local raw = redis.call('GET', legacy)
    if not raw then
        return nil
    end
    local job = k.prefix .. qname .. '/' .. id
    local pttl = redis.call('PTTL', legacy)
    redis.call('HSET', job, unpack(data_fields(lmstfy_job_data(id, raw))))
    if pttl > 0 then
        redis.call('PEXPIRE', job, pttl)
    end
    redis.call('DEL', legacy)
    redis.call('SADD', k.registry, qname)
    return job
end
