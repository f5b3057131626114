"""At-least-once, crash-proof: SIGKILL the server under load five times and lose no job.

benchmarks/crash_test.py does the work (it prints the same figures for a human); this asserts on them.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import crash_test
from lmstfy_py.config.model import fastest_http_server

# What `serve` runs by default: what a kill loses is decided by the store's steps, not by the HTTP
# server, whose part (a request cut mid-way) test_e2e and test_serve_stop hold under each.
HTTP_SERVERS = (fastest_http_server(),)


async def test_no_job_is_lost_when_the_server_is_killed(tmp_path: Path, http_server: str) -> None:
    settings = crash_test.Settings(kills=5, interval=1.0, drain_timeout=40)
    report = await crash_test.run(tmp_path, settings, http_server)
    assert report.starts == 6
    assert report.published > 100  # enough load that kills land amid requests
    assert report.missing == []
    # Every job is in exactly one place: ACKed (its answer maybe lost with the server), dead, or expired.
    assert report.accounted == report.published, report
    assert report.expired_still_stored == 0  # an expired job leaves nothing behind
    assert report.exit_code == 0
