"""Real processes for the benchmarks and the tests alike: `lmstfy-py serve` (lmstfy_servers.py),
redis-server (redis_servers.py) and groups of them: clusters, Sentinel (redis_groups.py).

It lives under benchmarks/ because the benchmarks start their servers with it and must not depend
on the test suite; the tests use it from here, as they use the benchmarks' measuring code. No
pytest here: a failure is an exception carrying the process's stderr.
"""
