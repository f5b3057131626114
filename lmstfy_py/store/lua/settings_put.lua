-- settings_put: set some of a queue's settings (SPEC 13) and, in the same step, trim its event
-- log to its `events` setting now: exactly the last N kept, none (the log dropped) for 0.
-- KEYS[1] the queue's settings hash  KEYS[2] the queue's events stream
-- ARGV[1..] the settings to set: name, value, name, value... (validated by the web layer)
-- Returns the events setting now.
redis.call('HSET', KEYS[1], unpack(ARGV))
local most = tonumber(redis.call('HGET', KEYS[1], 'events')) or 0
if most > 0 then
    redis.call('XTRIM', KEYS[2], 'MAXLEN', most)
else
    redis.call('DEL', KEYS[2])
end
return most
