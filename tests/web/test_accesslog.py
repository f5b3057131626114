"""The access log: switched at run time by GET/POST /accesslog, one line per request while on.

In process the lines are read from the "lmstfy_py.access" logger (caplog); a real `lmstfy-py
serve` process shows that they reach stdout, and that hypercorn adds no log of its own.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis.asyncio

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.admin import switches
from lmstfy_py.config import Config, PoolConfig, ServerConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.web import create_admin_app, create_data_app
from lmstfy_py.web.accesslog import LOGGER_NAME
from tests.conftest import client_for

SWITCH_REACHES_S = 1.0  # the promise: POST /accesslog reaches every process within a second
OUTPUT_TIMEOUT = 15.0


@pytest.fixture
def runtime(standalone_web_runtime: Runtime) -> Runtime:
    # The log does not depend on the backend: standalone only.
    return standalone_web_runtime


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    return caplog


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER_NAME]


async def test_the_switch(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/accesslog")).json() == {"status": "disabled"}
    response = await admin.post("/accesslog", params={"status": "enable"})
    assert (response.status_code, response.json()) == (200, {"status": "enabled"})
    assert (await admin.get("/accesslog")).json() == {"status": "enabled"}
    assert (await admin.post("/accesslog", params={"status": "enable"})).json() == {"status": "enabled"}
    assert (await admin.post("/accesslog", params={"status": "disable"})).json() == {"status": "disabled"}
    assert (await admin.get("/accesslog")).json() == {"status": "disabled"}


@pytest.mark.parametrize("query", [{}, {"status": ""}, {"status": "enabled"}, {"status": "ENABLE"}, {"status": "on"}])
async def test_the_switch_refuses_other_words(admin: httpx.AsyncClient, query: dict[str, str]) -> None:
    response = await admin.post("/accesslog", params=query)
    assert (response.status_code, response.json()) == (400, {"error": "invalid status"})
    assert (await admin.get("/accesslog")).json() == {"status": "disabled"}


async def test_the_config_sets_the_switch_at_start(redis_url: str) -> None:
    config = Config(server=ServerConfig(access_log=True), pools={"default": PoolConfig("default", url=redis_url)})
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            assert (await admin.get("/accesslog")).json() == {"status": "enabled"}
    finally:
        await runtime.stop()


async def test_a_switch_made_before_a_workers_first_poll_reaches_it(redis_url: str) -> None:
    """Two workers: one switches the log on right after the other started (under a loaded CI
    machine, before that one's first poll): a read on the second must answer on, not its config."""
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with switches.access_log(admin, False) as first, switches.access_log(admin, False) as second:
            async with second._lock:  # its first poll held back until the switch was made
                await first.set(True)
            assert await second.current() is True
            assert second.on
    finally:
        await admin.delete(keys.ACCESS_LOG_SWITCH)
        await admin.aclose()


async def test_lines_appear_only_while_enabled(admin: httpx.AsyncClient, access_log: pytest.LogCaptureFixture) -> None:
    await admin.get("/version")
    await admin.post("/accesslog", params={"status": "enable"})
    await admin.get("/version", headers={"X-Request-ID": "rid-1"})
    await admin.get("/nowhere")
    await admin.post("/accesslog", params={"status": "disable"})
    await admin.get("/version", headers={"X-Request-ID": "rid-2"})

    logged = lines(access_log)
    # The switch is read as a request starts: the one that turns it on is not logged, the one that turns it off is.
    assert len(logged) == 3, logged
    assert logged[0].startswith("GET /version 200 ") and "request_id=rid-1 remote=127.0.0.1:123" in logged[0]
    assert logged[1].startswith("GET /nowhere 404 ")
    assert logged[2].startswith("POST /accesslog 200 ")
    assert all(line.split()[3].endswith("ms") for line in logged)


async def test_the_data_plane_is_logged_without_query_strings(
    runtime: Runtime, access_log: pytest.LogCaptureFixture
) -> None:
    assert runtime.access_log_switch is not None
    await runtime.access_log_switch.set(True)
    async with client_for(create_data_app(runtime)) as data:
        await data.get("/api/ns/q/size", params={"token": "secret-token"})
        await data.get("/api/ns/q%0Afake 200/size")
    first, second = lines(access_log)
    assert first.startswith("GET /api/ns/q/size 200 ") and "secret" not in first
    # A percent-encoded newline stays encoded: a path cannot forge a log line.
    assert second.startswith("GET /api/ns/q%0Afake%20200/size 400 ") and "\n" not in second


async def test_a_token_in_an_admin_path_is_hidden(runtime: Runtime, access_log: pytest.LogCaptureFixture) -> None:
    assert runtime.access_log_switch is not None
    await runtime.access_log_switch.set(True)
    token = await runtime.tokens.create("default", "ns", "logged")
    async with client_for(create_admin_app(runtime)) as admin:
        limit = {"read": 10, "write": 10, "interval": 1}
        assert (await admin.put(f"/token/ns/{token}/limit", json=limit)).status_code in (200, 201)
        assert (await admin.get(f"/token/ns/default:{token}/limit")).status_code == 200
        assert (await admin.delete(f"/token/ns/{token}")).status_code == 204
    written = lines(access_log)
    assert [line.split(" ", 2)[:2] for line in written] == [
        ["PUT", "/token/ns/***/limit"],
        ["GET", "/token/ns/***/limit"],
        ["DELETE", "/token/ns/***"],
    ]
    shown = [str(vars(record)) for record in access_log.records]  # lmstfy's fields too
    assert not any(token in line for line in written + shown)


# -- a real server -------------------------------------------------------------------------


@contextlib.contextmanager
def running_server(tmp_path: Path, redis_url: str, *args: str) -> Iterator[Server]:
    """`lmstfy-py serve` on free ports and the test Redis, its stdout and stderr in files; killed at the end."""
    # One worker unless `args` say otherwise (a later --workers wins).
    with Server(tmp_path, redis_url=redis_url, args=["--workers", "1", *args]) as server:
        yield server.start()


def _wait_for_output(server: Server, text: str) -> str:
    deadline = time.monotonic() + OUTPUT_TIMEOUT
    while text not in server.stdout():
        assert time.monotonic() < deadline, f"{text!r} not in stdout: {server.stdout()!r}"
        time.sleep(0.02)
    return server.stdout()


def test_a_server_logs_requests_to_stdout_while_enabled(tmp_path: Path, redis_url: str) -> None:
    with running_server(tmp_path, redis_url) as server:
        httpx.get(f"{server.data_url}/api/ns/before/size")
        assert httpx.post(f"{server.admin_url}/accesslog?status=enable").json() == {"status": "enabled"}
        httpx.get(f"{server.data_url}/api/ns/during/size", headers={"X-Request-ID": "e2e-1"})
        httpx.post(f"{server.admin_url}/accesslog?status=disable")
        httpx.get(f"{server.data_url}/api/ns/after/size")
        httpx.post(f"{server.admin_url}/accesslog?status=enable")
        httpx.get(f"{server.data_url}/api/ns/marker/size")
        output = _wait_for_output(server, "/api/ns/marker/size")
    logged = [line for line in output.splitlines() if "/api/" in line]
    assert len(logged) == 2, output
    assert "GET /api/ns/during/size 200 " in logged[0] and "request_id=e2e-1 remote=127.0.0.1:" in logged[0]
    assert "GET /api/ns/marker/size 200 " in logged[1]
    assert "lmstfy_py.access" not in server.stderr()  # stdout only


def test_a_server_started_with_access_log_logs_from_the_start(tmp_path: Path, redis_url: str) -> None:
    with running_server(tmp_path, redis_url, "--access-log") as server:
        assert httpx.get(f"{server.admin_url}/accesslog").json() == {"status": "enabled"}
        httpx.get(f"{server.data_url}/api/ns/q/size")
        output = _wait_for_output(server, "GET /api/ns/q/size 200 ")
    # One line per request: hypercorn's own access log stays off.
    assert output.count("/api/ns/q/size") == 1, output


def test_the_switch_reaches_every_worker_of_every_instance_within_a_second(tmp_path: Path, redis_url: str) -> None:
    """Two instances on one Redis, one of them with two workers: one POST /accesslog switches all three."""
    with (
        running_server(tmp_path, redis_url, "--workers", "2") as first,
        running_server(tmp_path, redis_url) as second,
    ):
        httpx.post(f"{first.admin_url}/accesslog?status=enable")
        time.sleep(SWITCH_REACHES_S)
        # A connection each: the kernel spreads new connections over the first instance's workers.
        for i in range(20):
            httpx.get(f"{first.data_url}/api/ns/first-{i}/size")
            httpx.get(f"{second.data_url}/api/ns/second-{i}/size")
        assert httpx.get(f"{second.admin_url}/accesslog").json() == {"status": "enabled"}
        _wait_for_output(first, "/api/ns/first-19/size")
        _wait_for_output(second, "/api/ns/second-19/size")
        httpx.post(f"{second.admin_url}/accesslog?status=disable")
        time.sleep(SWITCH_REACHES_S)
        for i in range(20):
            httpx.get(f"{first.data_url}/api/ns/later-{i}/size")
        httpx.post(f"{second.admin_url}/accesslog?status=enable")  # logged: the marker of the end
        _wait_for_output(second, "POST /accesslog")
        time.sleep(0.2)
        first_log, second_log = first.stdout(), second.stdout()
    assert all(f"/api/ns/first-{i}/size 200" in first_log for i in range(20)), first_log
    assert all(f"/api/ns/second-{i}/size 200" in second_log for i in range(20)), second_log
    assert "/later-" not in first_log, first_log


def test_the_status_right_after_a_switch_is_the_switch_on_every_worker(tmp_path: Path, redis_url: str) -> None:
    """`token-cli accesslog enable` then `token-cli accesslog` at once: the status must not lag a poll behind."""
    with running_server(tmp_path, redis_url, "--workers", "2") as server:
        for _ in range(10):
            for status, answer in (("enable", "enabled"), ("disable", "disabled")):
                # A connection each: the kernel spreads them over both workers.
                assert httpx.post(f"{server.admin_url}/accesslog?status={status}").json() == {"status": answer}
                assert httpx.get(f"{server.admin_url}/accesslog").json() == {"status": answer}
