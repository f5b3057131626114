-- Prepended to every script by scripts.py. Element formats match store/keys.py:
-- list element (tries, id) is lmstfy's 'HHc0'; timer member (ns, q, tries, id) is lmstfy's
-- 'Hc0Hc0HHc0', followed by 'X' when it is a reservation (nothing for a delayed job), so that a
-- member whose job expired still says which count it was part of.
--
-- Job hash fields: d data (msgpack [body, attributes], or [body, attributes, traceparent,
-- tracestate] for a job with a trace context, store/jobdata.py; past DATA_CHUNK bytes continued
-- in d2, d3..., see data_fields), s state (T delayed, R ready, X reserved, D dead), t tries packed in
-- its element, c created (unix ms; absent: the job id's time), p priority (absent: 0), a
-- attempts (deliveries so far), e last error, k died (unix ms), b backoff "base:max" ms
-- (absent: fixed), u unique_for ms (absent: none), K keep s (absent: 0; SPEC 13), g group, h 1
-- while a grouped job holds its group's slot on the timer, y ms since when it is ready (when
-- later than its publish) (SPEC 14; see fc()), w its traceparent followed by its tracestate, only
-- for a job whose trace is sampled (SPEC 15: the steps that end a reservation or the job return it
-- from the HMGET they make anyway, for the server's spans; deliveries read it from the data).
-- A job with a keep that ended is a record for that long (PEXPIRE): s is then its end, C
-- completed, E expired or L deleted; f when it ended (unix ms), r the complete's result.
-- Queue meta hash fields: T delayed jobs, X reserved jobs, seq (the priority set's and the
-- groups' FIFO counter), paused ("1" while paused), gseq (the group ring's last turn).

local PRIORITY_STEP = 17592186044416 -- 2^44: a priority set score is (256 - priority) * 2^44 + seq

-- A job's data is stored in pieces of DATA_CHUNK bytes, fields d, d2, d3..., so that the hash of
-- a job with a small body stays a listpack: Redis keeps a hash compact only while each of its
-- values is at most hash-max-listpack-value bytes (64 by default) and it has at most
-- hash-max-listpack-entries (128) entries. A 100-byte job's hash then takes ~210 bytes, not ~400
-- as a hashtable (benchmarks/bench_memory.py). Data of more than DATA_CHUNKS_MAX pieces is stored
-- whole in d: past that the listpack saves less (none past ~1 KB) and reading more pieces costs
-- more Redis CPU than it is worth. A piece shorter than DATA_CHUNK is the last; data stored whole
-- in d (by a version before this layout, or too long) has no d2, and reads the same.
local DATA_CHUNK = 64
local DATA_CHUNKS_MAX = 8 -- read_data reads d3..d8 by name

-- The fields and values that store `data`, for HSET: {'d', piece, 'd2', piece, ...}.
local function data_fields(data)
    if #data <= DATA_CHUNK or #data > DATA_CHUNK * DATA_CHUNKS_MAX then
        return {'d', data}
    end
    local out = {'d', string.sub(data, 1, DATA_CHUNK), 'd2', string.sub(data, DATA_CHUNK + 1, 2 * DATA_CHUNK)}
    for i = 3, math.ceil(#data / DATA_CHUNK) do
        out[#out + 1] = 'd' .. i
        out[#out + 1] = string.sub(data, (i - 1) * DATA_CHUNK + 1, i * DATA_CHUNK)
    end
    return out
end

-- A job's data given its fields d and d2, read already with the job's other fields (false when
-- absent; d false: the job is gone): one more HMGET only when d2 is a whole piece.
local function read_data(job_key, first, second)
    if not second then
        return first
    end
    if #second ~= DATA_CHUNK then
        return first .. second
    end
    local pieces = {first, second}
    for _, piece in ipairs(redis.call('HMGET', job_key, 'd3', 'd4', 'd5', 'd6', 'd7', 'd8')) do
        if not piece then
            break
        end
        pieces[#pieces + 1] = piece
        if #piece ~= DATA_CHUNK then
            break
        end
    end
    return table.concat(pieces)
end

local function pack_element(tries, id)
    return struct.pack('<HHc0', tries, #id, id)
end

-- Pops up to `most` elements off a list, 'RPOP' (the old end) or 'LPOP' (the new end), calling
-- each(id) with the id of each until the list is empty; returns the sum of what each returned
-- (1 for a job it counts, say), for the scripts that walk a list in chunks (a dead letter).
local function pop_each(list, pop, most, each)
    local total = 0
    for _ = 1, most do
        local element = redis.call(pop, list)
        if not element then
            break
        end
        local _, id = struct.unpack('<HHc0', element)
        total = total + each(id)
    end
    return total
end

local function pack_member(ns, q, tries, id, reserved)
    local member = struct.pack('<Hc0Hc0HHc0', #ns, ns, #q, q, tries, #id, id)
    if reserved then
        return member .. 'X'
    end
    return member
end

-- Returns ns, q, tries, id, whether the member is a reservation ('X' after it), whether it is
-- an expiry ('E' after it: a job with a keep ends as expired then, see set_ttl), and whether it
-- is a queue's wake-up ('W' after it, id "": its rate's next token is there, see fc()).
local function unpack_member(member)
    local ns, q, tries, id, after = struct.unpack('<Hc0Hc0HHc0', member)
    local suffix = string.sub(member, after, after)
    return ns, q, tries, id, suffix == 'X', suffix == 'E', suffix == 'W'
end

local function paused(meta)
    return redis.call('HGET', meta, 'paused') == '1'
end

-- One token is enough: whoever takes it and leaves jobs behind puts it back
-- (see reserve.lua), so wake lists never grow.
local function ensure_wake(wake_key)
    if redis.call('LLEN', wake_key) == 0 then
        redis.call('LPUSH', wake_key, '1')
    end
end

-- A queue's settings (SPEC 13, 14) from its settings hash qc/{ns}/q, read ONCE per queue per step
-- (one HMGET, cached by the queue's base "{ns}/q") for everything that needs them: create_job
-- (keep, when the publish names none), event() (events),
-- reserve_from_queue and count() (max_reserved, rate), the groups (group_concurrency). A queue with
-- none set costs that one read, as `events` alone did before. The bucket's state (burst, bt, bts)
-- is read only for a queue with a rate (fc().tokens). STEP caches what one step reads once: each
-- queue's settings (by base) and the clock (STEP.ts, see write_event); a step's function starts
-- it afresh (store/scripts.py LIB_PER_CALL). Every top-level local of this library costs every
-- call of every step run by EVALSHA (closures, upvalues; a Redis Cluster, Redis < 7), where the
-- library runs before each step, but nothing per call as a function library (loaded once,
-- store/function_library.py): flow control adds only STEP's use, settings_of, undelayed and fc.
local STEP = {}

-- Flow control's helpers (SPEC 14: limits and groups), made only by a step that meets a limited
-- queue or a grouped job (as outcomes()); defined below reserve_element, which they use.
local fc

local function settings_of(base)
    local s = STEP[base]
    if s == nil then
        local f = redis.call('HMGET', 'qc/' .. base, 'events', 'max_reserved', 'rate', 'group_concurrency', 'keep')
        s = {events = tonumber(f[1]) or 0, max_reserved = tonumber(f[2]) or 0, rate = tonumber(f[3]) or 0,
            group_concurrency = tonumber(f[4]) or 1, keep = f[5]}
        STEP[base] = s
    end
    return s
end

-- Counts in a queue's meta hash never go below 0: jobs stored before the counts existed are
-- not in them. A reserved slot freed (X down) wakes a consume of a queue with max_reserved that
-- holds ready jobs: a consume held back by the limit deleted the wake token (reserve_from_queue).
local function count(meta, field, delta)
    if redis.call('HINCRBY', meta, field, delta) < 0 then
        redis.call('HSET', meta, field, 0)
    end
    if field == 'X' and delta < 0 then
        local base = string.sub(meta, 3)
        if settings_of(base).max_reserved > 0 and not paused(meta) and fc().has_ready(base) then
            ensure_wake('w/' .. base)
        end
    end
end


-- Makes a job ready: into its queue's ready list (priority 0, lmstfy's layout), or by priority
-- into the queue's priority set, FIFO among equal priorities; wakes a long-poll unless paused.
-- `since` (ms): when it becomes ready later than its publish (due, release, ttr, promote,
-- respawn), kept as field y for stats' oldest_ready_ms; nil at publish (its creation tells).
-- A job of a `group` (false/nil: none) goes to its group instead (fc().push; `front`: a
-- release or ttr making it ready again, ahead of its group's others). `stated`: its fields s
-- and t are written already (create_job, with the job's others), for a job of no group.
-- q = {ready, prio, wake, meta}
local function push_ready(job_key, q, tries, id, priority, since, group, front, stated)
    if group then
        fc().push(job_key, q, tries, id, priority, since, group, front)
        return
    end
    local element = pack_element(tries, id)
    if priority > 0 then
        local seq = redis.call('HINCRBY', q.meta, 'seq', 1)
        redis.call('ZADD', q.prio, (256 - priority) * PRIORITY_STEP + seq, element)
    else
        redis.call('LPUSH', q.ready, element)
    end
    if since then
        redis.call('HSET', job_key, 's', 'R', 't', tries, 'y', since)
    elseif not stated then
        redis.call('HSET', job_key, 's', 'R', 't', tries)
    end
    if not paused(q.meta) then
        ensure_wake(q.wake)
    end
end

-- Puts a job on the timer as delayed until due (ms). The queue's delayed jobs are also counted by
-- due second (hash dd/{ns}/q, built from its meta key n/{ns}/q), wherever the meta's T count
-- changes (here and undelayed), for stats' due buckets. `stated`: as push_ready's.
local function push_delayed(job_key, timer, meta, ns, qname, tries, id, due, stated)
    redis.call('ZADD', timer, due, pack_member(ns, qname, tries, id, false))
    if not stated then
        redis.call('HSET', job_key, 's', 'T', 't', tries)
    end
    count(meta, 'T', 1)
    redis.call('HINCRBY', 'dd/' .. string.sub(meta, 3), math.floor(due / 1000), 1)
end

-- A delayed job's member (due at `due` ms; nil: unknown) left the timer: its counts go.
local function undelayed(meta, due)
    count(meta, 'T', -1)
    if due then
        local key, second = 'dd/' .. string.sub(meta, 3), math.floor(tonumber(due) / 1000)
        if redis.call('HINCRBY', key, second, -1) <= 0 then
            redis.call('HDEL', key, second)
        end
    end
end

-- Whether a job's state (field s) is a record's: the job ended and is only kept (SPEC 13).
local function is_record(state)
    return state == 'C' or state == 'E' or state == 'L'
end

-- Whether an element (ready: R; a reservation: X; a delay: T) is its job's and not one left by an
-- earlier job of the same id, whose hash expired by its ttl with the element still there: a
-- business id used again would otherwise be delivered twice, or sent to the dead letter at the
-- old reservation's ttr. A job with no state (adopted from lmstfy's layout) is taken as it is.
local function in_state(state, wanted)
    return state == nil or state == false or state == wanted
end

-- A live job's ttl left (ms, PTTL's: -1 forever) given its keep (field K): a job with a keep
-- and a ttl lives its keep longer (set_ttl); a record's is its keep left.
-- A grouped job's hash outlives its ttl by 60 s (set_ttl; pump.lua's expire): a literal in each,
-- as a constant here would cost every step an upvalue.
local function ttl_left(job_key, keep, record, grouped)
    local pttl = redis.call('PTTL', job_key)
    local extra = (tonumber(keep) or 0) * 1000 + (grouped and 60000 or 0)
    if extra > 0 and pttl > 0 and not record then
        return math.max(pttl - extra, 1)
    end
    return pttl
end

-- result() waiters of a job (store/outcomes.py) keep a counter rw/{ns}/q/id beside its hash
-- j/{ns}/q/id while they wait (wait_mark.lua); an ending step tells them on the channel
-- ended/{ns} (keys.py).
local function waited_for(job_key)
    return redis.call('EXISTS', 'rw' .. string.sub(job_key, 2)) == 1
end

-- The helpers of kept jobs and told waiters (SPEC 13), made only by a step that needs one: a
-- step run by EVALSHA runs this library first, and each function defined at its top level costs
-- every such call (~0.15 us each), those defined in here only the calls that use them.
local function outcomes()
    local o = {}

    -- One job's fields as job_state.lua answers them (see there), false where absent.
    function o.state_reply(job_key, timer, ns, qname, id)
        local f = redis.call('HMGET', job_key, 'd', 't', 's', 'p', 'a', 'e', 'k', 'c', 'd2', 'r', 'f', 'K', 'g')
        if not f[1] then
            return nil
        end
        local due = false
        if f[3] == 'T' or f[3] == 'X' then
            due = redis.call('ZSCORE', timer, pack_member(ns, qname, tonumber(f[2]), id, f[3] == 'X')) or false
        end
        local pttl = ttl_left(job_key, f[12], is_record(f[3]), f[13])
        return {read_data(job_key, f[1], f[9]), pttl, tonumber(f[2]), f[3] or false,
            f[4] or false, f[5] or false, f[6] or false, f[7] or false, f[8] or false, due, f[10] or false,
            f[11] or false, f[13] or false}
    end

    -- Tells a job's waiters that it ended, with its fields as they are now (state_reply, whose
    -- due an ended job has none of): a job that leaves no record is answered all the same. Their
    -- counter goes with it: a told waiter answers at once, without a round trip to leave it.
    function o.tell_waiters(job_key, id)
        local tag, qname = string.match(job_key, '^j/({[^}]*})/([^/]*)/')
        local reply = o.state_reply(job_key, '', '', qname, id)
        if reply then
            redis.call('PUBLISH', 'ended/' .. tag, cmsgpack.pack({qname .. '/' .. id, reply}))
        end
        redis.call('DEL', 'rw' .. string.sub(job_key, 2))
    end

    function o.now_ms()
        local t = redis.call('TIME')
        return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end

    -- A job's expiry member on its namespace's timer t/{ns} (keys.py), built from its key
    -- j/{ns}/q/id: its timer member with 'E' after it. Returns the timer's key and the member.
    function o.expiry_member(job_key, id)
        local tag, qname = string.match(job_key, '^j/({[^}]*})/([^/]*)/')
        return 't/' .. tag, pack_member(string.sub(tag, 2, -2), qname, 0, id, false) .. 'E'
    end

    return o
end

-- Events (SPEC 13): a queue with `events` N > 0 in its settings hash qc/{ns}/q records each change
-- of a job in the stream ev/{ns}/q (keys.py), keeping exactly the last N, in the step that makes the
-- change. Both keys are built from the job's key j/{ns}/q/id (the same hash tag, so the same slot).
-- An entry's id is "<seq>-0", seq counting the queue's events (field eseq of its settings: ids
-- stay consecutive, so a reader knows exactly how many were trimmed); its fields: k the kind, e
-- the JSON object the event stream sends as it is. A step reads each queue's setting once
-- (settings_of) and the clock once (STEP.ts): with events off, that read is all it costs.

local function write_event(base, most, kind, qname, id, attempt, reason, priority)
    local seq = redis.call('HINCRBY', 'qc/' .. base, 'eseq', 1)
    local ts = STEP.ts
    if not ts then
        local t = redis.call('TIME')
        ts = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        STEP.ts = ts
    end
    local json = '{"kind":"' .. kind .. '","job_id":' .. cjson.encode(id) .. ',"queue":' .. cjson.encode(qname)
        .. ',"ts_ms":' .. ts .. ',"attempt":' .. attempt
    if reason then
        json = json .. ',"reason":' .. cjson.encode(reason)
    elseif priority then
        json = json .. ',"priority":' .. priority
    end
    redis.call('XADD', 'ev/' .. base, 'MAXLEN', most, seq .. '-0', 'k', kind, 'e', json .. '}')
end

-- Records `kind` for the job of job_key when its queue keeps events: `attempt` its attempts now
-- (nil: read from the job), `reason` for released/buried/dead, `priority` for published.
local function event(job_key, kind, reason, priority, attempt)
    local tag, qname, id = string.match(job_key, '^j/({[^}]*})/([^/]*)/(.*)$')
    local base = tag .. '/' .. qname
    local most = settings_of(base).events
    if most > 0 then
        attempt = attempt or tonumber(redis.call('HGET', job_key, 'a')) or 0
        write_event(base, most, kind, qname, id, attempt, reason, priority)
    end
end

-- Gives a live job `ttl` ms to live (0: no change, it lives for ever). Without a keep its hash
-- expires then, as lmstfy's. With a keep (s) it lives that much longer, and its expiry member on
-- the timer has the pump end it then as expired, leaving its record (pump.lua). A grouped job
-- too, its hash living 60 s longer: a hash that vanished by PEXPIRE would leave its
-- group's slot or ready element behind; the pump ends it through remove_job, which frees them.
-- Returns whether it made an expiry member.
local function set_ttl(job_key, id, ttl, keep, grouped)
    keep = tonumber(keep) or 0
    if ttl <= 0 then
        return false
    end
    if keep <= 0 and not grouped then
        redis.call('PEXPIRE', job_key, ttl)
        return false
    end
    redis.call('PEXPIRE', job_key, ttl + keep * 1000 + (grouped and 60000 or 0))
    local o = outcomes()
    local timer, member = o.expiry_member(job_key, id)
    redis.call('ZADD', timer, o.now_ms() + ttl, member)
    return true
end

-- Puts a job in its dead letter: it stops expiring, and keeps why and when it died.
local function push_dead(job_key, dead, id, reason, now)
    redis.call('LPUSH', dead, pack_element(0, id))
    redis.call('HSET', job_key, 's', 'D', 't', 0, 'k', now)
    if reason and reason ~= '' then
        redis.call('HSET', job_key, 'e', reason)
    end
    redis.call('PERSIST', job_key)
    if waited_for(job_key) then
        outcomes().tell_waiters(job_key, id)
    end
end

-- The delay a job's backoff gives after `attempts` deliveries: 0 for fixed (lmstfy's: ready
-- again at once), min(base * 2^(attempts - 1), max) for exponential.
local function backoff_ms(spec, attempts)
    if not spec then
        return 0
    end
    local base, most = string.match(spec, '^(%d+):(%d+)$')
    local delay = tonumber(base) * 2 ^ (math.max(attempts, 1) - 1)
    return math.floor(math.min(delay, tonumber(most)))
end

-- A job's id stays taken for its unique_for after it ended (ACK, deletion): the tombstone
-- u/{ns}/q/id beside its hash j/{ns}/q/id (the same hash tag, so the same slot).
local function tombstone_key(job_key)
    return 'u' .. string.sub(job_key, 2)
end

local function ended(job_key, unique_for)
    if unique_for then
        redis.call('SET', tombstone_key(job_key), '1', 'PX', unique_for)
    end
end

-- A job ends (ACK, complete, deletion, expiry): with a keep (field K, seconds) it stays that long
-- as a record in state `final`, with when it ended and `result` (complete only; nil for none);
-- without, it is deleted, as lmstfy does. Its waiters are told either way; with a unique_for
-- its id stays taken. `now` may be nil (the step has no clock argument): Redis's TIME then.
local ENDS = {C = 'completed', E = 'expired', L = 'deleted'}

local function finish(job_key, id, final, now, result, keep, unique_for, grouped)
    keep = tonumber(keep) or 0
    event(job_key, ENDS[final])
    local waiting = waited_for(job_key)
    if grouped and keep <= 0 then -- its expiry member (set_ttl) goes with it
        redis.call('ZREM', outcomes().expiry_member(job_key, id))
    end
    if keep <= 0 and not waiting then -- lmstfy's end: gone at once
        redis.call('DEL', job_key)
        ended(job_key, unique_for)
        return
    end
    local o = outcomes()
    redis.call('HSET', job_key, 's', final, 'f', now or o.now_ms())
    if result then
        redis.call('HSET', job_key, 'r', result)
    end
    if waiting then
        o.tell_waiters(job_key, id)
    end
    if keep > 0 then
        redis.call('PEXPIRE', job_key, keep * 1000)
        redis.call('ZREM', o.expiry_member(job_key, id))
    else
        redis.call('DEL', job_key)
    end
    ended(job_key, unique_for)
end

-- Appends name and value to an HSET's field list when the field is to be stored at all.
local function field_if(fields, present, name, value)
    if present then
        fields[#fields + 1] = name
        fields[#fields + 1] = value
    end
end

-- Stores a new job and makes it ready now, or puts it on the timer (publish.lua, cron_fire.lua).
-- j = {key, tombstone, registry, timer, settings (the queue's settings hash)}, q = the queue's
-- {ready, prio, wake, meta}; new = {data, ttl (ms, 0 = forever), due (ms, 0 = now), tries,
-- created (ms; 0: the job id tells, no field c is kept), priority, unique_for (ms), backoff
-- ("base:max" or ""), keep (s; "" = the queue's setting), group (nil: none), reserved (nil, or
-- the tries left to a waiting consume that takes the job in this step: publish.lua's
-- hand_new_job)}. Returns 1 (2: it has an expiry member on the timer, see set_ttl), or 0 when a
-- job with this id is alive in the queue or its id is still taken (unique_for): nothing is
-- stored. A record of an ended job with this id is replaced (it holds no id).
local function create_job(j, q, ns, qname, id, new)
    local state = redis.call('HGET', j.key, 's')
    if state and not is_record(state) then
        return 0
    end
    -- An id the engine made (created 0) is new but for a retry of the same publish, which finds
    -- the job above, or with the same unique_for its tombstone: without one there is none.
    local own_id = tonumber(new.created) == 0 and new.unique_for == 0
    if not own_id and redis.call('EXISTS', j.tombstone) == 1 then
        return 0
    end
    if state then
        redis.call('DEL', j.key)
    end
    local keep = new.keep
    if keep == '' then
        keep = settings_of(string.sub(j.settings, 4)).keep
        new.keep = keep -- resolved once: hand_new_job reads it
    end
    -- All of the hash in one HSET, its state and tries too (push_ready's and push_delayed's, told
    -- `stated`): each call from a script costs Redis more than its command does.
    local fields = data_fields(new.data)
    field_if(fields, (tonumber(keep) or 0) > 0, 'K', keep)
    field_if(fields, tonumber(new.created) > 0, 'c', new.created)
    field_if(fields, new.group, 'g', new.group)
    field_if(fields, new.trace, 'w', new.trace)
    field_if(fields, new.priority > 0, 'p', new.priority)
    field_if(fields, new.backoff ~= '', 'b', new.backoff)
    field_if(fields, new.unique_for > 0, 'u', new.unique_for)
    field_if(fields, new.reserved, 'a', 1) -- as reserve_element writes it: its first attempt
    local state, tries = new.due > 0 and 'T' or 'R', new.tries
    if new.reserved then
        state, tries = 'X', new.reserved
    end
    local n = #fields
    fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = 's', state, 't', tries
    redis.call('HSET', j.key, unpack(fields))
    local expires = set_ttl(j.key, id, new.ttl, keep, new.group)
    if new.unique_for > 0 and new.ttl > 0 then -- the id stays taken unique_for after the ttl ends it
        redis.call('SET', j.tombstone, '1', 'PX', new.ttl + new.unique_for)
    end
    redis.call('SADD', j.registry, qname)
    if new.due > 0 then
        push_delayed(j.key, j.timer, q.meta, ns, qname, new.tries, id, new.due, true)
    elseif not new.reserved then
        push_ready(j.key, q, new.tries, id, new.priority, nil, new.group, nil, true)
    end
    event(j.key, 'published', nil, new.priority, 0)
    return expires and 2 or 1
end

-- A reservation's end: its ttr deadline, or sooner, the moment a job whose hash vanishes by its
-- ttl (no keep, no group: set_ttl's PEXPIRE) is gone, so that a reserved slot (max_reserved) is
-- not held past the job. `left`: its ttl_left; `now`: a function giving the time (ms).
local function reservation_end(deadline, left, keep, grouped, now)
    if left > 0 and (tonumber(keep) or 0) <= 0 and not grouped then
        return math.min(deadline, now() + left + 1) -- + 1: the hash is gone by then (PEXPIRE's ms)
    end
    return deadline
end

-- Reserves the job of a ready element just popped, in the same step: its timer member at the
-- ttr deadline (reservation_end), its state and tries; appends its seven answer fields to
-- r.out. The caller counts what it reserved in the queue's meta (X), once per step. An element
-- whose job expired is dropped (false). r = {timer, deadline, ns, prefix "j/{ns}/", used (1, or
-- 0 to keep the tries), out}; q = the queue's {ready, prio, wake, meta}.
local function reserve_element(r, qname, q, element)
    local tries, id = struct.unpack('<HHc0', element)
    local job = r.prefix .. qname .. '/' .. id
    local fields = redis.call('HMGET', job, 'd', 'c', 'd2', 's', 'K', 'g', 'a')
    if not fields[1] or not in_state(fields[4], 'R') then -- expired, ended and kept, or another's: stale
        return false
    end
    local remain, left = tries - r.used, ttl_left(job, fields[5], false, fields[6])
    local deadline = reservation_end(tonumber(r.deadline), left, fields[5], fields[6], function()
        r.now = r.now or outcomes().now_ms() -- one TIME per step
        return r.now
    end)
    redis.call('ZADD', r.timer, deadline, pack_member(r.ns, qname, remain, id, true))
    -- The attempts read with the rest, and written with the state: each call from a script costs
    -- Redis more than its command (an HINCRBY here and a count per job were two of seven calls).
    local attempts = (tonumber(fields[7]) or 0) + 1
    redis.call('HSET', job, 's', 'X', 't', remain, 'a', attempts)
    event(job, 'reserved', nil, nil, attempts)
    local out, base = r.out, #r.out
    out[base + 1] = qname
    out[base + 2] = id
    out[base + 3] = read_data(job, fields[1], fields[3])
    out[base + 4] = left
    out[base + 5] = remain
    out[base + 6] = attempts
    out[base + 7] = fields[2] or false
    return true
end

-- Whether a publish's new job, ready now (publish.lua asks for no other), may go to a waiting
-- consume in its own step without being made ready first: it has no group, and its queue is not
-- paused, has no groups or limits, and holds no other ready job, so it is the job
-- reserve_from_queue would give first. Otherwise the publish makes it ready and reserves through reserve_from_queue.
local function takes_new_job(q, new)
    if new.group then
        return false
    end
    local m = redis.call('HMGET', q.meta, 'paused', 'gseq')
    if m[1] == '1' or m[2] then
        return false
    end
    local s = settings_of(string.sub(q.meta, 3))
    return s.max_reserved == 0 and s.rate == 0 and redis.call('LLEN', q.ready) == 0
        and redis.call('EXISTS', q.prio) == 0
end

-- Reserves the job create_job just stored for the waiting consume (new.reserved: takes_new_job
-- said yes; new.keep as create_job resolved it), as push_ready, a pop and reserve_element would
-- have, with what the step knows: its hash holds its state and first attempt already; its timer
-- member at the ttr deadline, the queue's count X, its seven answer fields in r.out. No other job
-- is ready, so a wake token would wake someone for nothing: it goes, as reserve_from_queue's would.
local function hand_new_job(r, q, qname, id, new)
    local left = new.ttl > 0 and new.ttl or -1 -- ttl_left's answer: PTTL less the keep set_ttl adds
    local deadline = reservation_end(tonumber(r.deadline), left, new.keep, nil, function()
        return outcomes().now_ms()
    end)
    redis.call('ZADD', r.timer, deadline, pack_member(r.ns, qname, new.reserved, id, true))
    count(q.meta, 'X', 1)
    redis.call('DEL', q.wake)
    event(r.prefix .. qname .. '/' .. id, 'reserved', nil, nil, 1)
    local out, base = r.out, #r.out
    out[base + 1] = qname
    out[base + 2] = id
    out[base + 3] = new.data
    out[base + 4] = left
    out[base + 5] = new.reserved
    out[base + 6] = 1
    out[base + 7] = tonumber(new.created) > 0 and new.created or false
end

-- Groups (SPEC 14). A grouped job (field g) ready waits in its group's zset gq/{ns}/q/<group>,
-- scored as the priority set (priority first, then the order it became ready; a release or ttr
-- puts it ahead of the group's first), its id in gy/{ns}/q scored by when it became ready. The
-- ring gr/{ns}/q holds the groups with a deliverable job (a ready one and a free slot), scored by
-- turn (meta field gseq, which exists exactly while the ring does); member "" is the turn of
-- the ungrouped jobs (ready list and priority set), put in by a reserve while the ring exists.
-- gs/{ns}/q counts each group's slots in use: a reserved job, or one holding its slot on the
-- timer through a release delay or backoff (field h). Every key is built from the queue's base
-- "{ns}/q"; each goes when empty (a field at 0).
-- The limits: max_reserved: the meta hash's X count is the slots in use. The rate's
-- token bucket lives in the settings hash: bt tokens (absent: full), bts when they were counted
-- (ms, Redis's clock); refilled at rate/s up to burst (absent: max(1, ceil(rate))), one token per
-- delivered job. A queue held back by a limit gets no wake token back: count() wakes it when a slot
-- is freed; for the rate, one wake-up member (its timer member with id "" and 'W' after it) is
-- put on the timer at the next whole token, and the reserve tells the Engine when (r.wake_at) so
-- the pump is woken then; the pump, meeting it, wakes the queue (pump.lua).
fc = function()
    local g = STEP.fc -- built once per step
    if g then
        return g
    end
    g = {}
    STEP.fc = g
    local EPSILON = 1e-9 -- a float refill that should make a whole token makes one
    g.EPSILON = EPSILON

    -- Whether a queue (its base "{ns}/q") holds a deliverable job: its ready list, priority set, or
    -- a group in its ring.
    function g.has_ready(base)
        return redis.call('LLEN', 'r/' .. base) > 0 or redis.call('EXISTS', 'rp/' .. base) == 1
            or redis.call('EXISTS', 'gr/' .. base) == 1
    end

    -- `member` gets a turn at the ring's tail, unless it has one.
    function g.enqueue(base, meta, member)
        local ring = 'gr/' .. base
        if not redis.call('ZSCORE', ring, member) then
            redis.call('ZADD', ring, redis.call('HINCRBY', meta, 'gseq', 1), member)
        end
    end

    -- The group gets a turn when it holds a ready job and a free slot.
    function g.reopen(base, meta, group)
        local used = tonumber(redis.call('HGET', 'gs/' .. base, group)) or 0
        if used < settings_of(base).group_concurrency and redis.call('EXISTS', 'gq/' .. base .. '/' .. group) == 1 then
            g.enqueue(base, meta, group)
        end
    end

    function g.push(job_key, q, tries, id, priority, since, group, front)
        local base = string.sub(q.meta, 3)
        local queued = 'gq/' .. base .. '/' .. group
        local score
        if front then
            local first = redis.call('ZRANGE', queued, 0, 0, 'WITHSCORES')[2]
            score = first and tonumber(first) - 1
        end
        if not score then
            score = (256 - priority) * PRIORITY_STEP + redis.call('HINCRBY', q.meta, 'seq', 1)
        end
        redis.call('ZADD', queued, score, pack_element(tries, id))
        redis.call('ZADD', 'gy/' .. base, since or outcomes().now_ms(), id)
        redis.call('HSET', job_key, 's', 'R', 't', tries)
        g.reopen(base, q.meta, group)
        if not paused(q.meta) then
            ensure_wake(q.wake)
        end
    end

    -- A slot of the group is free again (its job ended, was released, or came due).
    function g.slot_freed(meta, group)
        local base = string.sub(meta, 3)
        if redis.call('HINCRBY', 'gs/' .. base, group, -1) <= 0 then
            redis.call('HDEL', 'gs/' .. base, group)
        end
        g.reopen(base, meta, group)
        if not paused(meta) and g.has_ready(base) then
            ensure_wake('w/' .. base)
        end
    end

    -- A grouped ready job leaves its group without being reserved (ACK, delete, expiry, destroy).
    function g.unqueue(meta, group, tries, id)
        local base = string.sub(meta, 3)
        local queued = 'gq/' .. base .. '/' .. group
        redis.call('ZREM', queued, pack_element(tries, id))
        redis.call('ZREM', 'gy/' .. base, id)
        if redis.call('EXISTS', queued) == 0 then
            redis.call('ZREM', 'gr/' .. base, group)
            g.close_ring(base, meta)
        end
    end

    -- A ring with no group left is no ring: the queue is served as one without groups.
    function g.close_ring(base, meta)
        local ring = 'gr/' .. base
        local left = redis.call('ZCARD', ring)
        if left == 0 or (left == 1 and redis.call('ZSCORE', ring, '')) then
            redis.call('DEL', ring)
            redis.call('HDEL', meta, 'gseq')
        end
    end

    -- One job without a group: the priority set first, then the ready list; stale elements dropped.
    local function ungrouped_one(r, qname, q)
        while true do
            local element = redis.call('ZPOPMIN', q.prio)[1] or redis.call('RPOP', q.ready)
            if not element then
                return false
            end
            if reserve_element(r, qname, q, element) then
                return true
            end
        end
    end

    local function ungrouped_ready(q)
        return redis.call('LLEN', q.ready) > 0 or redis.call('EXISTS', q.prio) == 1
    end

    -- One job of the group, the first of its zset; stale elements dropped.
    local function grouped_one(r, qname, q, base, group)
        local queued = 'gq/' .. base .. '/' .. group
        while true do
            local element = redis.call('ZPOPMIN', queued)[1]
            if not element then
                return false
            end
            local _, id = struct.unpack('<HHc0', element)
            redis.call('ZREM', 'gy/' .. base, id)
            if reserve_element(r, qname, q, element) then
                redis.call('HINCRBY', 'gs/' .. base, group, 1)
                return true
            end
        end
    end

    -- Up to `want` jobs round the ring, one per turn; a member still deliverable after its turn
    -- gets the next turn at the tail. Returns how many it reserved.
    function g.reserve(r, qname, q, base, want)
        local ring, got = 'gr/' .. base, 0
        if ungrouped_ready(q) then
            g.enqueue(base, q.meta, '')
        end
        while got < want do
            local member = redis.call('ZPOPMIN', ring)[1]
            if not member then
                break
            end
            if member == '' then
                if ungrouped_one(r, qname, q) then
                    got = got + 1
                end
                if ungrouped_ready(q) then
                    g.enqueue(base, q.meta, '')
                end
            else
                -- A turn given before group_concurrency was lowered is no slot: the limit is read now.
                local used = tonumber(redis.call('HGET', 'gs/' .. base, member)) or 0
                if used < settings_of(base).group_concurrency and grouped_one(r, qname, q, base, member) then
                    got = got + 1
                end
                g.reopen(base, q.meta, member)
            end
        end
        g.close_ring(base, q.meta)
        return got
    end

    -- Every group with a slot in use and a ready job gets a turn (group_concurrency raised).
    function g.reopen_all(base)
        for _, group in ipairs(redis.call('HKEYS', 'gs/' .. base)) do
            g.reopen(base, 'n/' .. base, group)
        end
    end


    -- The limits.

    function g.tokens(s, base)
        if s.tokens == nil then
            local b = redis.call('HMGET', 'qc/' .. base, 'burst', 'bt', 'bts')
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local burst = tonumber(b[1]) or math.max(1, math.ceil(s.rate))
            local tokens = tonumber(b[2])
            if tokens == nil then
                tokens = burst
            else
                tokens = math.min(burst, tokens + math.max(0, now - (tonumber(b[3]) or now)) * s.rate / 1000)
            end
            s.tokens, s.now = tokens, now
        end
        return s.tokens
    end

    -- How many jobs of the queue may go now, at most `want`.
    function g.allowance(s, base, meta, want)
        local n = want
        if s.max_reserved > 0 then
            n = math.min(n, s.max_reserved - (tonumber(redis.call('HGET', meta, 'X')) or 0))
        end
        if s.rate > 0 then
            n = math.min(n, math.floor(g.tokens(s, base) + EPSILON))
        end
        return math.max(n, 0)
    end

    -- `got` jobs went: their tokens are taken.
    function g.spend(s, base, got)
        s.tokens = s.tokens - got
        redis.call('HSET', 'qc/' .. base, 'bt', s.tokens, 'bts', s.now)
    end

    -- The queue is held back by its rate: its wake-up member on the timer at the next whole token.
    function g.wake_later(r, s, qname)
        local at = s.now + math.max(1, math.ceil((1 - s.tokens) * 1000 / s.rate))
        redis.call('ZADD', r.timer, at, pack_member(r.ns, qname, 0, '', false) .. 'W')
        r.wake_at = math.min(r.wake_at or at, at)
    end

    return g
end

-- Reserves up to `want` ready jobs of one queue (reserve_element), its priority set before its
-- ready list; none from a paused queue; no more than its limits allow (fc()). Then whoever
-- takes a wake token and leaves jobs behind puts it back, unless a limit holds them back now; a
-- token over an empty queue would only wake someone for nothing, so it goes.
-- Returns how many it reserved (reserve.lua, and pump.lua handing due jobs to waiters).
local function reserve_from_queue(r, qname, q, want)
    -- The meta's gseq exists exactly while the queue has a ring (fc().enqueue, close_ring): read with
    -- the pause flag, a queue without groups pays no extra read for them.
    local m = redis.call('HMGET', q.meta, 'paused', 'gseq')
    if m[1] == '1' then
        return 0
    end
    local base = string.sub(q.meta, 3)
    local s, fl = settings_of(base), nil
    if s.max_reserved > 0 or s.rate > 0 then
        fl = fc()
        want = fl.allowance(s, base, q.meta, want)
    end
    local got = 0
    local ring = m[2] ~= false
    local prioritized = not ring and redis.call('EXISTS', q.prio) == 1
    if ring then
        got = fc().reserve(r, qname, q, base, want)
    end
    while got < want and not ring do
        local element
        if prioritized then
            element = redis.call('ZPOPMIN', q.prio)[1]
            prioritized = element ~= nil
        end
        element = element or redis.call('RPOP', q.ready)
        if not element then
            break
        end
        if reserve_element(r, qname, q, element) then
            got = got + 1
        end
    end
    if got > 0 then
        count(q.meta, 'X', got) -- before the allowance below reads it
    end
    if fl and s.rate > 0 then
        fl.spend(s, base, got)
    end
    local more
    if ring then
        more = fc().has_ready(base)
    else
        more = redis.call('LLEN', q.ready) > 0 or redis.call('EXISTS', q.prio) == 1
    end
    if not more then
        redis.call('DEL', q.wake)
    elseif fl and fl.allowance(s, base, q.meta, 1) == 0 then
        redis.call('DEL', q.wake)
        if s.rate > 0 and s.tokens + fl.EPSILON < 1 then
            fl.wake_later(r, s, qname)
        end
    else
        ensure_wake(q.wake)
    end
    return got
end

-- The tries packed in a reserved job's timer member; when the job is not reserved, nil and the
-- answer a worker verb gives: {"missing"} or {"not reserved"}. Also its group and its field w
-- (false: none).
local function reserved_tries(job_key)
    local f = redis.call('HMGET', job_key, 's', 't', 'g', 'w')
    if not f[1] then
        return nil, {'missing'}
    end
    if f[1] ~= 'X' then
        return nil, {'not reserved'}
    end
    return tonumber(f[2]), nil, f[3], f[4]
end

-- Ends the reservation of the job a worker verb names (bury, complete): its timer member and
-- count go, and its group's slot. Returns its tries, nil and its field w, or nil and the verb's
-- answer when it is not reserved.
local function take_reservation(job_key, timer, meta, ns, qname, id)
    local tries, refusal, group, trace = reserved_tries(job_key)
    if not tries then
        return nil, refusal
    end
    redis.call('ZREM', timer, pack_member(ns, qname, tries, id, true))
    count(meta, 'X', -1)
    if group then
        fc().slot_freed(meta, group)
    end
    return tries, nil, trace
end

-- Removes every trace of a job: the element where it waits (field s says where, field t
-- with which tries it was packed, p whether in the priority set), then its data, or keeps it as
-- a record (finish) in state `final` (nil: completed) ended at `now` (nil: Redis's clock). An
-- ended job's record is left as it is (0). Returns 1 and the job's field w when it removed it.
-- q = {timer, ready, dead, prio, meta, freed}: with `freed` (a number), the reservations it ends
-- are added to it for the caller to count in the meta at once (ack.lua), not each by itself.
local function remove_job(job_key, ns, qname, id, q, final, now)
    local f = redis.call('HMGET', job_key, 's', 't', 'p', 'u', 'K', 'g', 'h', 'w')
    local state, tries, group = f[1], tonumber(f[2]), f[6]
    if not state or is_record(state) then
        return 0
    end
    if state == 'T' or state == 'X' then
        -- The ZREM first: under maxmemory Redis refuses a script's first write if it may grow
        -- memory (the counts' HINCRBY), never one after a write that frees some, so an ACK still
        -- drains a full Redis.
        local member = pack_member(ns, qname, tries, id, state == 'X')
        local due = state == 'T' and redis.call('ZSCORE', q.timer, member)
        redis.call('ZREM', q.timer, member)
        if state == 'T' then
            undelayed(q.meta, due)
        elseif q.freed then
            q.freed = q.freed + 1 -- counted by the caller, once per step
        else
            count(q.meta, 'X', -1)
        end
        if group and (state == 'X' or f[7]) then
            fc().slot_freed(q.meta, group)
        end
    elseif state == 'R' and group then
        fc().unqueue(q.meta, group, tries, id)
    elseif state == 'R' then
        if (tonumber(f[3]) or 0) > 0 then
            redis.call('ZREM', q.prio, pack_element(tries, id))
        else
            redis.call('LREM', q.ready, -1, pack_element(tries, id))
        end
    elseif state == 'D' then
        redis.call('LREM', q.dead, -1, pack_element(tries, id))
    end
    finish(job_key, id, final or 'C', now, nil, f[5], f[4], group)
    return 1, f[8]
end
