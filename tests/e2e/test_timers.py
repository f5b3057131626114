"""Millisecond timers on a real server: delayed jobs come due on time, never early, all of them.

benchmarks/bench_timers.py measures (and prints the figures for a human); this asserts on them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.bench_timers import NS, Precision, measure_precision
from benchmarks.harness.lmstfy_servers import Server, create_token

# ~130 jobs due per second: a quarter of what one worker serves on a core, so that a machine
# busy with other work still keeps up and the lateness is the timers', not a queue's.
JOBS = 200
DELAYS_S = (0.5, 2.0)  # publishing (~0.2 s) is over before the first job is due
# Generous for a shared 2-core machine (measured calm: p99 4-12 ms), yet a timer loop that ticks
# (lmstfy: once a second) or only polls (every 100 ms, as for other processes' timers) fails it.
P99_BOUND_MS = 50
# Other processes' load spoils single runs (seen: p99 60-160 ms with a sound loop while other
# test suites kept the CPUs 80-90 % contended). A broken loop is late in every run, a sound one
# on time in most: the bound must hold in one of these runs; no job may be early or lost in any.
ATTEMPTS = 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with Server(tmp_path, args=["--workers", "1"]) as running:
        yield running.start()


async def test_delayed_jobs_are_never_early_all_arrive_and_are_late_by_milliseconds(server: Server) -> None:
    token = create_token(server, NS)
    runs: list[Precision] = []
    while len(runs) < ATTEMPTS and not any(run.p99_ms < P99_BOUND_MS for run in runs):
        found = await measure_precision(("127.0.0.1", server.port), token, JOBS, DELAYS_S, consumers=16, publishers=16)
        assert (found.published, found.delivered, found.duplicates) == (JOBS, JOBS, 0), found
        assert found.early == 0, found
        runs.append(found)
    assert min(run.p99_ms for run in runs) < P99_BOUND_MS, (f"load average {os.getloadavg()}", runs)
