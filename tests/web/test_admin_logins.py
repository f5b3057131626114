"""Failed admin logins are limited per client address, in the admin Redis (admin/logins.py).

Before, basic auth took 3,000 wrong passwords in 0.6 s. Now the 11th failure within a minute from one
address answers 429, and so does that address's right password until the minute ends; every other
address logs in as before.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import redis

from benchmarks.harness.lmstfy_servers import Server
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.web import create_admin_app
from tests.conftest import EVERY_HTTP_SERVER, client_for

HTTP_SERVERS = EVERY_HTTP_SERVER
RIGHT, WRONG = ("alice", "s3cret"), ("alice", "guess")
MAX_FAILURES, WINDOW_S = 10, 60  # what docs/API.md promises


@contextmanager
def secured_server(tmp_path: Path, redis_url: str, http_server: str) -> Iterator[Server]:
    config = tmp_path / "lmstfy.toml"
    config.write_text(f'[admin.accounts]\n{RIGHT[0]} = "{RIGHT[1]}"\n')
    # Two workers behind the one port: the count is shared, whichever worker a connection reaches.
    with Server(tmp_path, redis_url=redis_url, config=config, args=["--workers", "2"], http_server=http_server) as s:
        yield s.start()


@contextmanager
def client_from(address: str) -> Iterator[httpx.Client]:
    """A client whose connections leave from `address` (any of 127/8 is this machine on Linux); a new
    connection per request, so that both workers take some."""
    transport = httpx.HTTPTransport(local_address=address, limits=httpx.Limits(max_keepalive_connections=0))
    with httpx.Client(transport=transport, timeout=10) as client:
        yield client


def test_the_eleventh_failure_from_an_address_is_refused_and_others_are_not(
    tmp_path: Path, redis_url: str, http_server: str
) -> None:
    with secured_server(tmp_path, redis_url, http_server) as server:
        url = f"{server.admin_url}/token/ns"
        with client_from("127.0.0.1") as guesser, client_from("127.0.0.2") as other:
            for attempt in range(MAX_FAILURES):
                assert guesser.get(url, auth=WRONG).status_code == 401, attempt
            limited = guesser.get(url, auth=WRONG)
            right_but_limited = guesser.get(url, auth=RIGHT)
            from_elsewhere = other.get(url, auth=RIGHT)
            elsewhere_wrong = other.get(url, auth=WRONG)
            unauthenticated = guesser.get(url)  # no guess: nothing to limit
            public = guesser.get(f"{server.admin_url}/version")
        with redis.Redis.from_url(redis_url) as admin_redis:
            left_ms = admin_redis.pttl(keys.login_failures("127.0.0.1"))
    for answer in (limited, right_but_limited):
        assert answer.status_code == 429, answer.text
        retry_after = int(answer.headers["retry-after"])
        assert 1 <= retry_after <= WINDOW_S
        assert answer.json() == {"error": f"too many failed logins from this address, retry in {retry_after}s"}
    assert 0 < left_ms <= WINDOW_S * 1000  # the address is let in again when its minute ends
    assert (from_elsewhere.status_code, from_elsewhere.json()) == (200, {"tokens": {}})
    assert elsewhere_wrong.status_code == 401
    assert unauthenticated.status_code == 401
    assert public.status_code == 200


async def test_logins_go_on_unlimited_while_the_admin_redis_is_away(tmp_path: Path) -> None:
    # The limiter fails open alone: a wrong password is still 401, a right one reaches its route (503).
    own = RedisProcess(tmp_path / "redis")
    own.start()
    config = Config(pools={"default": PoolConfig("default", url=own.url)}, accounts=dict([RIGHT]))
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            own.stop()
            wrong = [await admin.get("/token/ns", auth=WRONG) for _ in range(MAX_FAILURES + 1)]
            right = await admin.get("/token/ns", auth=RIGHT)
            version = await admin.get("/version")
    finally:
        await runtime.stop()
        own.stop()
    assert [answer.status_code for answer in wrong] == [401] * (MAX_FAILURES + 1)
    assert right.status_code == 503 and right.json()["error"].startswith("storage unavailable"), right.text
    assert version.status_code == 200


async def test_a_frozen_admin_redis_delays_a_wrong_login_by_a_second_at_most(tmp_path: Path) -> None:
    own = RedisProcess(tmp_path / "redis")
    own.start()
    config = Config(pools={"default": PoolConfig("default", url=own.url)}, accounts=dict([RIGHT]))
    runtime = await Runtime.start(config, run_pumps=False)
    pid = own.pid
    assert pid is not None
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            os.kill(pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                wrong = await admin.get("/token/ns", auth=WRONG)
                seconds = time.monotonic() - started
            finally:
                os.kill(pid, signal.SIGCONT)
    finally:
        await runtime.stop()
        own.stop()
    assert wrong.status_code == 401, wrong.text
    assert seconds < 2.0
