"""Throttling across two real `lmstfy-py serve` processes sharing one Redis: one limit for both."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from tests.redis_procs import free_port
from tests.test_e2e import NS, QUEUE, Server, create_token, serve_command

PROPAGATION_S = 1.0  # the promise: a limit change reaches every process within this


class SharedRedisServer(Server):
    """A server on the test session's Redis (--redis-url) instead of an embedded one."""

    def __init__(self, tmp_path: Path, redis_url: str) -> None:
        super().__init__(tmp_path, tmp_path / "unused-data", free_port(), free_port())
        self.redis_url = redis_url

    def launch(self) -> None:
        ports = ["--host", "127.0.0.1", "--port", str(self.port), "--admin-port", str(self.admin_port)]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [*serve_command(), *ports, "--redis-url", self.redis_url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def start(self, *args: str) -> Server:
        self.launch()
        self._wait_ready()
        return self


S = TypeVar("S", bound=SharedRedisServer)


@contextmanager
def started_together(servers: tuple[S, ...]) -> Iterator[tuple[S, ...]]:
    """Starts the servers at once (start-up is most of these tests' time); cleans them all up."""
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server._wait_ready()
        yield servers
    finally:
        for server in servers:
            server.cleanup()


@pytest.fixture
def two_servers(tmp_path: Path, redis_url: str) -> Iterator[tuple[SharedRedisServer, ...]]:
    with started_together((SharedRedisServer(tmp_path, redis_url), SharedRedisServer(tmp_path, redis_url))) as servers:
        yield servers


def set_limit(server: Server, token: str, method: str, **limit: int) -> None:
    response = httpx.request(method, f"{server.admin_url}/token/{NS}/{token}/limit", json=limit)
    assert response.status_code in (200, 201), response.text


def publisher(server: Server, token: str) -> Callable[[], int]:
    def publish() -> int:
        response = httpx.put(f"{server.data_url}/api/{NS}/{QUEUE}", params={"token": token}, content=b"job")
        assert response.status_code in (201, 429), response.text
        return response.status_code

    return publish


def seconds_until(status: int, publish: Callable[[], int], timeout: float = 3.0) -> float:
    started = time.monotonic()
    while publish() != status:
        assert time.monotonic() - started < timeout, f"no {status} within {timeout}s"
        time.sleep(0.02)
    return time.monotonic() - started


def test_two_processes_share_one_limit(two_servers: tuple[SharedRedisServer, SharedRedisServer]) -> None:
    first, second = two_servers
    token = create_token(first)
    set_limit(first, token, "POST", write=5, interval=2)
    time.sleep(PROPAGATION_S)  # the second process has loaded the limit by now
    publishes = [publisher(first, token), publisher(second, token)]
    statuses = [publishes[i % 2]() for i in range(10)]
    assert statuses.count(201) == 5, statuses
    assert statuses[5:] == [429] * 5
    time.sleep(2)  # the window ends: both processes may publish again
    assert [publishes[i % 2]() for i in range(6)] == [201] * 5 + [429]


def test_a_limit_change_reaches_the_other_process_within_a_second(
    two_servers: tuple[SharedRedisServer, SharedRedisServer],
) -> None:
    first, second = two_servers
    token = create_token(first)
    publish_on_second = publisher(second, token)
    assert publish_on_second() == 201  # no limit yet

    # Created on the first: the second takes 1 unit, then answers 429.
    set_limit(first, token, "POST", write=1, interval=3600)
    assert seconds_until(429, publish_on_second) < PROPAGATION_S
    # Raised on the first: the second has a unit left in the same window.
    set_limit(first, token, "PUT", write=2, interval=3600)
    assert seconds_until(201, publish_on_second) < PROPAGATION_S
    assert publish_on_second() == 429
    # Deleted on the first: the second no longer limits.
    assert httpx.delete(f"{first.admin_url}/token/{NS}/{token}/limit").json() == {"msg": "success"}
    assert seconds_until(201, publish_on_second) < PROPAGATION_S
