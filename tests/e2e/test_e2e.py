"""`lmstfy-py serve` as a real process: start-up, HTTP, graceful stop, crash, persistence.

Each server runs its embedded Redis in a tmp data dir on free ports (benchmarks/harness/lmstfy_servers.py); the
`make_lmstfy_server` fixture (tests/conftest.py) kills whatever is left when a test ends, whatever
happened to it.
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import (
    NS,
    QUEUE,
    Server,
    accepted_connections,
    alive,
    child_pids,
    create_token,
    free_port,
    redis_pids,
    serve_command,
    wait_until,
)
from tests.conftest import EVERY_HTTP_SERVER, make_lmstfy_server

# Tests elsewhere import the harness from here, as they did before it moved to benchmarks/harness/lmstfy_servers.py.
__all__ = [
    "NS",
    "QUEUE",
    "Server",
    "alive",
    "child_pids",
    "create_token",
    "make_lmstfy_server",
    "redis_pids",
    "serve_command",
    "wait_until",
]

STOP_TIMEOUT = 5.0
# Every test here that starts a server runs under each HTTP server `serve` offers.
HTTP_SERVERS = EVERY_HTTP_SERVER


def publish(client: httpx.Client, token: str, body: bytes) -> str:
    response = client.put(f"/api/{NS}/{QUEUE}", params={"token": token}, content=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def consume(client: httpx.Client, token: str) -> dict[str, object]:
    response = client.get(f"/api/{NS}/{QUEUE}", params={"token": token})
    assert response.status_code == 200, response.text
    job: dict[str, object] = response.json()
    return job


def size(client: httpx.Client) -> int:
    response = client.get(f"/api/{NS}/{QUEUE}/size")
    assert response.status_code == 200, response.text
    value: int = response.json()["size"]
    return value


def stop_gracefully(server: Server) -> None:
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.wait(STOP_TIMEOUT) == 0, server.stderr()
    assert time.monotonic() - started < STOP_TIMEOUT
    assert not alive(server.redis_pid)


def test_jobs_and_tokens_survive_a_graceful_restart(make_lmstfy_server: Callable[[], Server], http_server: str) -> None:
    server = make_lmstfy_server().start()
    assert f"data {server.data_url}" in server.stderr()
    assert f"({http_server})" in server.stderr()  # the HTTP server the test asked for runs
    assert "redis embedded in" in server.stderr()
    token = create_token(server)
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        first, *_ = [publish(client, token, f"job-{i}".encode()) for i in range(3)]
        job = consume(client, token)
        assert (job["job_id"], base64.b64decode(str(job["data"]))) == (first, b"job-0")
        assert client.delete(f"/api/{NS}/{QUEUE}/job/{first}", params={"token": token}).status_code == 204
        assert size(client) == 2
        # An idle keep-alive connection must not hold the stop up.
        stop_gracefully(server)

    again = make_lmstfy_server().start()
    with httpx.Client(base_url=again.data_url, timeout=5) as client:
        assert size(client) == 2
        assert base64.b64decode(str(consume(client, token)["data"])) == b"job-1"
    stop_gracefully(again)


def test_several_workers_serve_and_stop_together(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start("--workers", "2")
    assert server.proc is not None
    children = child_pids(server.proc.pid)
    assert len(children) == 3  # two workers and the embedded Redis
    token = create_token(server)
    request_ids = set()
    for i in range(16):  # a fresh connection each time, whichever worker accepts it
        with httpx.Client(base_url=server.data_url, timeout=5) as client:
            response = client.put(f"/api/{NS}/{QUEUE}", content=f"job-{i}".encode(), headers={"X-Token": token})
            assert response.status_code == 201, response.text
            request_ids.add(response.headers["x-request-id"])
    # Each worker draws its own request ids: none repeats another worker's.
    assert len(request_ids) == 16
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        assert size(client) == 16
    stop_gracefully(server)
    assert not any(alive(pid) for pid in children)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="one socket per worker is Linux-only")
def test_connections_opened_at_once_are_shared_by_the_workers(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start("--workers", "2")
    assert server.proc is not None
    workers = [pid for pid in child_pids(server.proc.pid) if pid != server.redis_pid]
    # Opened together, as a pool of clients does: a shared listening socket let one worker take them all.
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(32)]
    try:
        assert wait_until(lambda: sum(accepted_connections(pid, server.port) for pid in workers) == 32, 5)
        # Spread by a hash of the client's port: fewer than 4 of 32 on one worker has odds of 1e-6.
        assert min(accepted_connections(pid, server.port) for pid in workers) >= 4
    finally:
        for client in clients:
            client.close()
    stop_gracefully(server)


def test_a_second_server_on_a_busy_port_exits_2_naming_it(
    make_lmstfy_server: Callable[[], Server], tmp_path: Path
) -> None:
    server = make_lmstfy_server().start("--workers", "2")
    flags = [
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--admin-port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "other"),
    ]
    done = subprocess.run(
        [*serve_command(), *flags, "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{server.port} for the data API" in done.stderr
    stop_gracefully(server)


@pytest.mark.parametrize(
    ("config_text", "flags", "named"),
    [
        ('[server]\nport = "seven"\n', [], "[server] port: expected an integer"),
        ("[server]\nport = 7000\n", ["--admin-port", "7000"], "--admin-port: must differ from port"),
        ("[sever]\n", [], "unknown section [sever]"),
        ("", ["--fsync", "sometimes"], '--fsync: expected "everysec" or "always", got "sometimes"'),
        ('[server]\nfsync = "no"\n', [], '[server] fsync: expected "everysec" or "always", got "no"'),
        ("[server]\nfsync = 1\n", [], "[server] fsync: expected a string, got an integer"),
    ],
)
def test_a_bad_config_exits_2_with_one_line(tmp_path: Path, config_text: str, flags: list[str], named: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(config_text)
    done = subprocess.run(
        [*serve_command(), "--config", str(config), "--data-dir", str(tmp_path / "data"), *flags],
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("lmstfy-py: error: ")
    assert named in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_killed_server_leaves_no_redis_behind(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start()
    token = create_token(server)
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        publish(client, token, b"survivor")
    server.signal(signal.SIGKILL)
    server.wait(STOP_TIMEOUT)
    assert wait_until(lambda: not alive(server.redis_pid), 5)

    again = make_lmstfy_server().start()  # the data dir lock is free again
    with httpx.Client(base_url=again.data_url, timeout=5) as client:
        # Redis got SIGTERM from the kernel, not SIGKILL: it flushed its AOF on the way out.
        assert base64.b64decode(str(consume(client, token)["data"])) == b"survivor"
    stop_gracefully(again)
