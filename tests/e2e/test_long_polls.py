"""Long-polls at scale and at shutdown, on real server processes.

The scale check's figures are measured by benchmarks/bench_longpolls.py (which prints them for a human).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks import bench_longpolls
from tests.conftest import EVERY_HTTP_SERVER
from tests.e2e.test_e2e import NS, QUEUE, Server, create_token, make_lmstfy_server

__all__ = ["make_lmstfy_server"]  # the fixture, shared with test_e2e

HTTP_SERVERS = EVERY_HTTP_SERVER  # long-polls at scale and at a stop, under each HTTP server `serve` offers

WAITERS = 2000


async def test_two_thousand_long_polls_share_a_bounded_set_of_redis_connections(
    tmp_path: Path, http_server: str
) -> None:
    report = await bench_longpolls.run(tmp_path, WAITERS, http_server=http_server)
    assert report.accepted == WAITERS  # all of them held open while Redis's clients were counted
    assert report.blocked == 1, report  # one shared BRPOP for the 2,000 waiters
    assert report.redis_connections <= 140, report  # the request pool's 128 and a few more, not one per waiter
    assert (report.delivered, report.distinct, report.errors) == (WAITERS, WAITERS, [])
    assert report.exit_code == 0


async def test_sigterm_answers_waiting_long_polls_and_exits_0(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start()
    token = create_token(server)
    async with httpx.AsyncClient(base_url=server.data_url, timeout=30) as client:
        params = {"token": token, "timeout": 30}
        polls = [asyncio.create_task(client.get(f"/api/{NS}/{QUEUE}", params=params)) for _ in range(20)]
        await asyncio.sleep(0.5)  # all of them waiting
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        answers = await asyncio.wait_for(asyncio.gather(*polls), 5)
        answered_in = time.monotonic() - started
    assert [a.status_code for a in answers] == [404] * 20
    assert all(a.json() == {"msg": "no job available"} for a in answers)
    assert answered_in < 2.0  # not after their 30 s timeout, nor cut off by the 5 s graceful timeout
    assert await asyncio.to_thread(server.wait, 5.0) == 0, server.stderr()
