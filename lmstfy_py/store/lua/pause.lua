-- pause: stop or resume delivering a queue's jobs. Publishes and timers go on; a paused queue
-- keeps no wake token, so long-polls waiting on it are not woken; resuming wakes one if jobs wait.
-- KEYS[1] meta hash  KEYS[2] ready list  KEYS[3] priority set  KEYS[4] wake list
-- ARGV[1] "1" to pause, "0" to resume
-- Returns 1.
if ARGV[1] == '1' then
    redis.call('HSET', KEYS[1], 'paused', '1')
    redis.call('DEL', KEYS[4])
else
    redis.call('HDEL', KEYS[1], 'paused')
    -- Its ready list, priority set, or a group's turn (fc's): jobs of groups only are ready too.
    if fc().has_ready(string.sub(KEYS[1], 3)) then
        ensure_wake(KEYS[4])
    end
end
return 1
