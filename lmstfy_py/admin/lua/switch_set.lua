-- switch_set: set a run-time switch and bump its version in one step, so that every process,
-- polling the version, sees each change exactly once.
-- KEYS[1] the switch's hash {state, version}
-- ARGV[1] the new state
-- Returns the new version.
redis.call('HSET', KEYS[1], 'state', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'version', 1)
