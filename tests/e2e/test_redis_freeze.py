"""A Redis that stops answering (SIGSTOP: frozen, as behind a partition) under a real server.

The promise (docs/API.md, "When Redis fails"): during a freeze of any length every request,
long-polls included, is answered 503 no later than 3 s after Redis stopped answering it; a
long-poll never answers "no job available" while the storage is away; service is back within
1 s of Redis answering again; the log says so once per process and change.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import NS, QUEUE, Server, create_token
from benchmarks.harness.redis_servers import RedisProcess
from tests.conftest import EVERY_HTTP_SERVER

HTTP_SERVERS = EVERY_HTTP_SERVER  # the promises below hold under each HTTP server `serve` offers

FREEZE_S = 8.0  # longer than the old 5 s timeout plus its retry's, shorter than a CI minute
ANSWER_WITHIN_S = 3.0
BACK_WITHIN_S = 1.0


@dataclass
class Answer:
    what: str
    sent: float
    answered: float
    status: int
    body: dict[str, object]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis")
    server.start()
    yield server
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture
def server(tmp_path: Path, redis: RedisProcess, http_server: str) -> Iterator[Server]:
    # --workers left at its default, the CPU count: every worker says it once.
    with Server(tmp_path, redis_url=redis.url, http_server=http_server) as started:
        yield started.start()


async def timed(what: str, request: Awaitable[httpx.Response]) -> Answer:
    sent = time.monotonic()
    response = await request
    return Answer(what, sent, time.monotonic(), response.status_code, response.json())


async def test_every_request_is_answered_within_3_s_of_a_freeze_and_service_returns_within_1_s(
    redis: RedisProcess, server: Server
) -> None:
    token = create_token(server)
    params = {"token": token}
    limits = httpx.Limits(max_connections=200)
    async with (
        httpx.AsyncClient(base_url=server.data_url, timeout=30, limits=limits) as data,
        httpx.AsyncClient(base_url=server.admin_url, timeout=30) as admin,
    ):
        assert (await data.put(f"/api/{NS}/{QUEUE}", params=params, content=b"before")).status_code == 201
        # Waiting before the freeze: their Redis stops answering while they wait.
        waiting = [
            asyncio.create_task(timed("long-poll 30 s", data.get(f"/api/{NS}/idle", params={**params, "timeout": 30})))
            for _ in range(20)
        ]
        await asyncio.sleep(0.5)
        assert redis.pid is not None
        os.kill(redis.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        guard = subprocess.Popen(["sh", "-c", f"sleep 30; kill -CONT {redis.pid}"], start_new_session=True)
        try:
            during: list[asyncio.Task[Answer]] = []
            while time.monotonic() - frozen_at < FREEZE_S - ANSWER_WITHIN_S:
                during += [
                    asyncio.create_task(timed("publish", data.put(f"/api/{NS}/{QUEUE}", params=params, content=b"x"))),
                    asyncio.create_task(timed("consume", data.get(f"/api/{NS}/{QUEUE}", params=params))),
                    asyncio.create_task(
                        timed("long-poll 2 s", data.get(f"/api/{NS}/idle", params={**params, "timeout": 2}))
                    ),
                    asyncio.create_task(timed("peek", data.get(f"/api/{NS}/{QUEUE}/peek", params=params))),
                    asyncio.create_task(timed("size", data.get(f"/api/{NS}/{QUEUE}/size"))),
                    asyncio.create_task(timed("token", admin.post(f"/token/{NS}", params={"description": "x"}))),
                    asyncio.create_task(timed("ready", admin.get("/ready"))),
                ]
                await asyncio.sleep(0.5)
            answers = await asyncio.gather(*waiting, *during)
            # Still frozen here: everything was answered while Redis said nothing.
            assert time.monotonic() - frozen_at < FREEZE_S
        finally:
            os.kill(redis.pid, signal.SIGCONT)
            os.killpg(guard.pid, signal.SIGKILL)
            guard.wait()
        thawed_at = time.monotonic()
        back_at = await first_success(data, params)
    late = [a for a in answers if a.answered - max(a.sent, frozen_at) > ANSWER_WITHIN_S]
    assert not late, [(a.what, round(a.answered - max(a.sent, frozen_at), 2)) for a in late]
    for answer in answers:
        assert answer.status == 503, (answer.what, answer.status, answer.body)
        assert str(answer.body["error"]).startswith(("storage unavailable: redis timed out", "pools not answering"))
    assert back_at - thawed_at < BACK_WITHIN_S
    # One line when it went, one when it came back (its health check probes every 0.5 s), per worker
    # process (--workers defaults to the CPU count); no line per failed request.
    workers = os.cpu_count() or 1
    await asyncio.sleep(1.0)
    log = server.stderr()
    assert log.count("pool default: redis unavailable: redis timed out") == workers, log
    assert log.count("pool default: redis answers again") == workers, log
    assert "WARNING" not in log and "Traceback" not in log, log


async def first_success(data: httpx.AsyncClient, params: dict[str, str]) -> float:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        answer = await data.put(f"/api/{NS}/{QUEUE}", params=params, content=b"after")
        if answer.status_code == 201:
            return time.monotonic()
        await asyncio.sleep(0.02)
    pytest.fail("the server did not serve again within 10 s of Redis answering")


def test_a_server_started_before_its_redis_logs_one_line_until_redis_comes(tmp_path: Path, http_server: str) -> None:
    """Unreachable at start: the server starts, answers /ready 503, and says so once per process and
    change, not once per retry of each background loop."""
    redis = RedisProcess(tmp_path / "redis")  # its port is chosen, nothing listens there yet
    server = Server(tmp_path, redis_url=redis.url, http_server=http_server)
    try:
        server.start()
        time.sleep(2.0)
        not_ready = httpx.get(f"{server.admin_url}/ready", timeout=5)
        before = server.stderr()
        redis.start()
        time.sleep(1.5)
        after = server.stderr()
        ready = httpx.get(f"{server.admin_url}/ready", timeout=5)
    finally:
        server.cleanup()
        redis.stop()
    workers = os.cpu_count() or 1
    assert not_ready.status_code == 503
    assert not_ready.json()["pools"] == {"default": "cannot connect to redis"}
    assert before.count("pool default: redis unavailable: cannot connect to redis") == workers, before
    assert after.count("pool default: redis answers again") == workers, after
    assert "WARNING" not in after and "Traceback" not in after, after
    assert ready.status_code == 200
