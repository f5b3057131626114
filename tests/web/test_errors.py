"""How exceptions become responses: the 500 and 503 paths, with no mock of Redis."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import cast

import httpx
import pytest
from redis import exceptions as redis_errors
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.errors import LmstfyError
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app, create_data_app
from lmstfy_py.web.errors import as_lmstfy_error
from lmstfy_py.web.middleware import build_app, route
from tests.conftest import client_for, free_port


async def _boom(request: Request) -> Response:
    raise ZeroDivisionError("a bug")


async def test_unexpected_exception_is_a_logged_500_with_request_id(caplog: pytest.LogCaptureFixture) -> None:
    app = build_app(cast(Runtime, None), [route("/boom", "GET", _boom)])  # the route needs no runtime
    async with client_for(app) as client:
        with caplog.at_level(logging.ERROR, logger="lmstfy_py.web.errors"):
            response = await client.get("/boom")
    assert (response.status_code, response.json()) == (500, {"error": "internal error"})
    assert len(response.headers["x-request-id"]) == 32
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (redis_errors.ConnectionError("Error 111 connecting to 10.0.0.1:6379"), "cannot connect to redis"),
        (redis_errors.TimeoutError("Timeout reading"), "redis timed out"),
        (redis_errors.BusyLoadingError("LOADING"), "redis loading"),
        (redis_errors.ResponseError("LOADING Redis is loading the dataset in memory"), "redis loading"),
        (redis_errors.ClusterDownError("CLUSTERDOWN"), "redis cluster is down"),
        (redis_errors.MaxConnectionsError("Too many connections"), "too many redis connections"),
        (redis_errors.ReadOnlyError("READONLY"), "redis is read-only"),
        # redis-py's classes (Cluster and Sentinel pools), and the same replies from store/pipelined.py
        (redis_errors.OutOfMemoryError("command not allowed when used memory > 'maxmemory'"), "redis is out of memory"),
        (redis_errors.MasterDownError("Link with MASTER is down"), "redis lost its master"),
        (redis_errors.ResponseError("MISCONF Errors writing to the AOF file"), "redis cannot persist its data"),
        (redis_errors.ResponseError("BUSY Redis is busy running a script."), "redis is busy running a script"),
        (ConnectionRefusedError(111, "refused"), "cannot connect to redis"),
        (TimeoutError(), "redis timed out"),
    ],
)
def test_storage_errors_are_503(exc: Exception, reason: str) -> None:
    err = as_lmstfy_error(exc)
    assert (err.status, err.body()) == (503, {"error": f"storage unavailable: {reason}"})


def test_starlette_http_errors() -> None:
    for status in (404, 405):
        err = as_lmstfy_error(HTTPException(status))
        assert (err.status, err.body()) == (404, {"error": "api not found"})
    err = as_lmstfy_error(HTTPException(400, "Invalid form"))
    assert (err.status, err.body()) == (400, {"error": "Invalid form"})


def test_other_errors_are_500() -> None:
    err = as_lmstfy_error(redis_errors.ResponseError("WRONGTYPE"))
    assert (type(err), err.status, err.body()) == (LmstfyError, 500, {"error": "internal error"})


@pytest.fixture
async def redis_down() -> AsyncIterator[Runtime]:
    """A runtime whose only pool points at a port nothing listens on."""
    pool = PoolConfig("default", url=f"redis://127.0.0.1:{free_port()}")
    runtime = await Runtime.start(Config(pools={"default": pool}), run_pumps=False)
    try:
        yield runtime
    finally:
        await runtime.stop()


async def test_redis_down_gives_503(redis_down: Runtime) -> None:
    unavailable = {"error": "storage unavailable: cannot connect to redis"}
    async with client_for(create_data_app(redis_down)) as data, client_for(create_admin_app(redis_down)) as admin:
        responses: list[httpx.Response] = [
            await data.put("/api/ns/q", headers={"X-Token": "t"}),  # the token lookup fails
            await data.get("/api/ns/q/size"),  # the engine call fails
            await admin.get("/info"),
            await admin.post("/token/ns", params={"description": "d"}),
        ]
    for response in responses:
        assert (response.status_code, response.json()) == (503, unavailable)
        assert response.headers["x-request-id"]
