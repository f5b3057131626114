"""The lean dispatcher (web/hot.py) answers exactly as the data app it stands in front of.

Every request below goes, in turn, through the plain Starlette data app and through HotRoutes
around another instance of it, both on one Runtime and one real Redis: status, headers (the
generated request id aside) and body must be the same, job ids and elapsed times masked. The
access log line and the HTTP metrics samples of a lean request must equal the app's.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.routing import Match, Route

from lmstfy_py import metrics
from lmstfy_py.admin.limits import Limit
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.logs import ACCESS_FIELDS
from lmstfy_py.runtime import Runtime
from lmstfy_py.types import NewJob
from lmstfy_py.web import create_data_app, data
from lmstfy_py.web.accesslog import LOGGER_NAME
from lmstfy_py.web.hot import HotRoutes
from lmstfy_py.web.middleware import MethodRouter
from tests.conftest import client_for, free_port

NS = "hot"
LONG = "n" * 256
BIG = b"x" * ((1 << 20) + 1)
_ids = itertools.count()

Case = Callable[[httpx.AsyncClient, Runtime, str], Awaitable[httpx.Response]]


@dataclass
class Pair:
    runtime: Runtime
    token: str
    plain: httpx.AsyncClient
    lean: httpx.AsyncClient


@pytest.fixture
def runtime(standalone_web_runtime: Runtime) -> Runtime:
    # Both paths make the same store calls: the backend changes nothing here, standalone only.
    return standalone_web_runtime


async def _pair(runtime: Runtime) -> AsyncIterator[Pair]:
    token = await runtime.tokens.create("default", NS, "test_hot")
    plain, lean = create_data_app(runtime), HotRoutes(create_data_app(runtime))
    async with client_for(plain) as plain_client, client_for(lean) as lean_client:
        yield Pair(runtime, token, plain_client, lean_client)


@pytest.fixture
async def pair(runtime: Runtime) -> AsyncIterator[Pair]:
    async for made in _pair(runtime):
        yield made


def _masked(body: bytes) -> Any:
    """The body with what differs between two runs of one request (new ids, times) masked."""
    if not body:
        return body
    try:
        found = json.loads(body)
    except ValueError:
        return body
    return _mask(found)


def _mask(value: Any) -> Any:
    if isinstance(value, list):
        return [_mask(item) for item in value]
    if isinstance(value, dict):
        return {key: "*" if key in ("job_id", "elapsed_ms") else _mask(item) for key, item in value.items()}
    if isinstance(value, str):  # a 429 names its token, made anew for each run
        return re.sub(r"token\(\w+\)", "token(*)", value)
    return value


def _shown(response: httpx.Response) -> tuple[int, list[tuple[str, str]], Any]:
    # A generated request id differs, but not its place among the headers.
    headers = [(name, "*" if name == "x-request-id" else value) for name, value in response.headers.multi_items()]
    masked = _masked(response.content)
    if masked != response.content:  # a masked body's length may differ: it must be its own
        assert response.headers["content-length"] == str(len(response.content))
        headers = [(name, value) for name, value in headers if name != "content-length"]
    return response.status_code, headers, masked


async def _same(pair: Pair, case: Case) -> httpx.Response:
    plain = await case(pair.plain, pair.runtime, pair.token)
    lean = await case(pair.lean, pair.runtime, pair.token)
    assert _shown(lean) == _shown(plain)
    assert re.fullmatch(r"[0-9a-f]{32}|[-A-Za-z0-9_.:+/=]{1,128}", lean.headers["x-request-id"])
    return lean


def _auth(token: str, **more: str) -> dict[str, str]:
    return {"X-Token": token, **more}


def _request(
    method: str, path: str, query: dict[str, Any] | None = None, body: bytes = b"", **headers: str | None
) -> Case:
    """A request made as given, `{token}` in a header or the query standing for the test's token;
    a header given as None is not sent."""

    async def case(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        sent = {key.replace("_", "-"): value.replace("{token}", token) for key, value in headers.items() if value}
        params = {key: str(value).replace("{token}", token) for key, value in (query or {}).items()}
        return await client.request(method, path, params=params, content=body, headers=sent)

    return case


def _publish(query: dict[str, Any] | None = None, body: bytes = b"job", **headers: str | None) -> Case:
    return _request("PUT", f"/api/{NS}/q", query, body, **{"X-Token": "{token}", **headers})


def _with_token(method: str, path: str, query: dict[str, Any] | None = None, **headers: str | None) -> Case:
    return _request(method, path, query, **{"X-Token": "{token}", **headers})


PUBLISHES = {
    "plain": _publish(),
    "with options": _publish({"delay": 0, "ttl": 60, "tries": 3, "priority": 7}),
    "ms options": _publish({"delay_ms": 0, "ttl": 60}),
    "token in the query": _publish({"token": "{token}"}, X_Token=None, X_Request_ID="given-1"),
    "no token": _publish(X_Token=None),
    "empty token": _publish(X_Token=""),
    "wrong token": _publish(**{"X-Token": "nottherighttoken"}),
    "unknown pool": _publish(**{"X-Token": "nopool:abc"}),
    "insane request id": _publish(**{"X-Request-ID": "bad id with spaces"}),
    "versioned": _publish(**{"Enable-Job-Version": "YES", "Job-Attr-Color": "red"}),
    "bad delay": _publish({"delay": "x"}),
    "negative ttl": _publish({"ttl": "-1"}),
    "ttl shorter than delay": _publish({"delay": 10, "ttl": 5}),
    "zero tries": _publish({"tries": 0}),
    "big priority": _publish({"priority": 256}),
    "delay and delay_ms": _publish({"delay": 1, "delay_ms": 1}),
    "id list": _publish({"job_id": "a,b"}),
    "bad id": _publish({"job_id": "b@d"}),
    "unique_for without id": _publish({"unique_for": 10}),
    "backoff_ms without backoff": _publish({"backoff_ms": 10}),
    "bad backoff": _publish({"backoff": "linear"}),
    "keep": _publish({"keep": 60}),
    "keep 0": _publish({"keep": 0}),
    "big keep": _publish({"keep": 2592001}),
    "bad keep": _publish({"keep": "1h"}),
    "group": _publish({"group": "order-42.a:b_c"}),
    "group and options": _publish({"group": "g", "priority": 3, "delay": 0, "keep": 0}),
    "empty group": _publish({"group": ""}),
    "bad group": _publish({"group": "b@d"}),
    "long group": _publish({"group": "g" * 129}),
    "oversize body": _publish(body=BIG),
    "empty body": _publish(body=b""),
}


async def _duplicate(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
    query = {"job_id": f"dup-{next(_ids)}"}
    await client.put(f"/api/{NS}/q", params=query, content=b"one", headers=_auth(token))
    return await client.put(f"/api/{NS}/q", params=query, content=b"two", headers=_auth(token))


async def _throttled(client: httpx.AsyncClient, runtime: Runtime, _: str) -> httpx.Response:
    token = await runtime.tokens.create("default", NS, "test_hot throttled")
    await runtime.limits.set("default", NS, token, Limit(read=1, write=1, interval=60))
    await client.put(f"/api/{NS}/q", content=b"x", headers=_auth(token))
    return await client.put(f"/api/{NS}/q", content=b"x", headers=_auth(token))


def _chunked(*chunks: bytes) -> Case:
    """A publish whose body comes in chunks, without a Content-Length (read as it arrives)."""

    async def case(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        return await client.put(f"/api/{NS}/q", content=body(), headers=_auth(token))

    return case


PUBLISHES["chunked"] = _chunked(b"one ", b"two")
PUBLISHES["chunked, oversize"] = _chunked(*[b"y" * (1 << 18)] * 5)


@pytest.mark.parametrize("name", PUBLISHES)
async def test_publish(pair: Pair, name: str) -> None:
    await _same(pair, PUBLISHES[name])
    await _drain(pair)


async def test_publish_duplicate_and_throttled(pair: Pair) -> None:
    assert (await _same(pair, _duplicate)).status_code == 200
    assert (await _same(pair, _throttled)).status_code == 429
    await _drain(pair)


async def test_bad_names(pair: Pair) -> None:
    for method in ("PUT", "GET"):
        for path in (f"/api/{NS}/_q", "/api/b@d/q", f"/api/{LONG}/q", f"/api/{NS}/{LONG}"):
            await _same(pair, _with_token(method, path))
    for path in (f"/api/{NS}/_q/job/x", f"/api/{NS}/q/job/b@d", f"/api/{NS}/q/job/{'i' * 129}", "/api/b@d/q/jobs"):
        await _same(pair, _with_token("DELETE", path, {"job_id": "x"}))


CONSUMES = {
    "bad ttr": {"ttr": "x"},
    "ttr and ttr_ms": {"ttr": 1, "ttr_ms": 1},
    "bad timeout": {"timeout": "-1"},
    "zero count": {"count": 0},
    "count over 100": {"count": 101},
    "empty": {"timeout": 0},
    "empty after a wait": {"timeout": 1},
    "ack, then empty": {"ack": "q:missing-1,other:a:b", "timeout": 0},
    "ack, empty value": {"ack": ""},
    "ack, empty entry": {"ack": "q:a,"},
    "ack, no colon": {"ack": "a"},
    "ack, bad queue": {"ack": "q.x:a"},
    "ack, bad id": {"ack": "q:b@d"},
    "ack, 101 ids": {"ack": ",".join(f"q:j{i}" for i in range(101))},
    "ack and a bad count": {"ack": "a", "count": 0},
}


@pytest.mark.parametrize("name", CONSUMES)
async def test_consume_errors(pair: Pair, name: str) -> None:
    response = await _same(pair, _with_token("GET", f"/api/{NS}/empty", CONSUMES[name]))
    assert response.status_code in (400, 404)


async def test_consume_and_ack(pair: Pair) -> None:
    async def one(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        await client.put(f"/api/{NS}/q2", content=b"job", headers=_auth(token, **{"Enable-Job-Version": "YES"}))
        return await client.get(f"/api/{NS}/q1,q2", params={"ttr": 30, "timeout": 0}, headers=_auth(token))

    async def many(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        for body in (b"a", b"b"):
            await client.put(f"/api/{NS}/q", content=body, headers=_auth(token))
        return await client.get(f"/api/{NS}/q", params={"count": 5, "ttr_ms": 30000}, headers=_auth(token))

    async def ack(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        await client.put(f"/api/{NS}/q", content=b"a", headers=_auth(token))
        job_id = (await client.get(f"/api/{NS}/q", headers=_auth(token))).json()["job_id"]
        return await client.delete(f"/api/{NS}/q/job/{job_id}", headers=_auth(token, **{"X-Request-ID": "r-1"}))

    async def ack_many(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        await client.put(f"/api/{NS}/q", content=b"a", headers=_auth(token))
        job_id = (await client.get(f"/api/{NS}/q", headers=_auth(token))).json()["job_id"]
        query = {"job_id": [f"{job_id},missing-1", job_id]}
        return await client.delete(f"/api/{NS}/q/jobs", params=query, headers=_auth(token))

    async def acking(client: httpx.AsyncClient, _: Runtime, token: str) -> httpx.Response:
        for body in (b"a", b"b"):
            await client.put(f"/api/{NS}/q", content=body, headers=_auth(token))
        job_id = (await client.get(f"/api/{NS}/q", params={"ttr": 30}, headers=_auth(token))).json()["job_id"]
        query = [("ack", f"q:{job_id},q2:missing-1"), ("ack", f"q:{job_id}"), ("ttr", "30")]
        return await client.get(f"/api/{NS}/q", params=query, headers=_auth(token))

    assert (await _same(pair, one)).status_code == 200
    assert (await _same(pair, acking)).status_code == 200
    assert (await _same(pair, many)).status_code == 200
    assert (await _same(pair, ack)).headers["x-request-id"] == "r-1"
    assert (await _same(pair, ack_many)).status_code == 204
    await _drain(pair)


ACKS = {
    "missing job": _with_token("DELETE", f"/api/{NS}/q/job/missing-job"),
    "no token": _request("DELETE", f"/api/{NS}/q/job/missing-job"),
    "wrong token": _request("DELETE", f"/api/{NS}/q/job/missing-job", **{"X-Token": "default:wrongtoken"}),
    "unknown pool": _request("DELETE", f"/api/{NS}/q/job/missing-job", **{"X-Token": "nopool:abc"}),
    "batch": _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": "a,b,,c"}),
    "batch, no ids": _with_token("DELETE", f"/api/{NS}/q/jobs"),
    "batch, empty ids": _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": ",,"}),
    "batch, bad id": _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": "a,b@d"}),
    "batch, 101 ids": _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": ",".join(f"j{i}" for i in range(101))}),
    "batch, no token": _request("DELETE", f"/api/{NS}/q/jobs", {"job_id": "a"}),
}


@pytest.mark.parametrize("name", ACKS)
async def test_ack_cases(pair: Pair, name: str) -> None:
    await _same(pair, ACKS[name])


# Not hot: these go to the app, and must still answer as it does.
FALLING_THROUGH = [
    ("POST", f"/api/{NS}/q"),
    ("HEAD", f"/api/{NS}/q"),
    ("PATCH", f"/api/{NS}/q"),
    ("PUT", f"/api/{NS}/q/"),
    ("GET", f"/api/{NS}//q"),
    ("GET", f"/api/{NS}/q/size"),
    ("DELETE", f"/api/{NS}/q/job/a/b"),
    ("DELETE", f"/api/{NS}/q/job/"),
    ("DELETE", f"/api/{NS}/q/jobs/"),
    ("DELETE", f"/api/{NS}/q/other/a"),
    ("GET", f"/api/{NS}/q/job/a"),
    ("PUT", f"/api/{NS}/q/job/a/promote"),
    ("GET", "/api/"),
    ("GET", "/nothing"),
]


@pytest.mark.parametrize(("method", "path"), FALLING_THROUGH)
async def test_other_requests_answer_as_the_app(pair: Pair, method: str, path: str) -> None:
    await _same(pair, _with_token(method, path))


def _scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/api/n/q"),
        ("GET", "/api/n/a,b"),
        ("DELETE", "/api/n/q/job/j"),
        ("DELETE", "/api/n/q/jobs"),
        *FALLING_THROUGH,
    ],
)
def test_the_dispatcher_takes_what_the_router_would_give_a_hot_route(runtime: Runtime, method: str, path: str) -> None:
    app = create_data_app(runtime)
    router = MethodRouter(app.router)
    first: Route | None = next(
        (r for r in router.by_method.get(method, ()) if r.matches(_scope(method, path))[0] is Match.FULL), None
    )
    scope = _scope(method, path)
    taken = HotRoutes(app)._dispatch(scope)
    assert taken == (first is not None and first.endpoint in _HOT_ENDPOINTS)
    if taken:
        assert first is not None
        assert (scope["route"], scope["path_params"]) == (first, first.matches(_scope(method, path))[1]["path_params"])


_HOT_ENDPOINTS = {data.publish, data.consume, data.ack, data.ack_many}


async def test_storage_down_is_the_same_503(pair: Pair) -> None:
    down = await Runtime.start(
        Config(pools={"default": PoolConfig("default", url=f"redis://127.0.0.1:{free_port()}")}), run_pumps=False
    )
    try:
        async with client_for(create_data_app(down)) as plain, client_for(HotRoutes(create_data_app(down))) as lean:
            broken = Pair(down, "sometoken", plain, lean)
            for case in (
                _publish(),
                _with_token("GET", f"/api/{NS}/q"),
                _with_token("DELETE", f"/api/{NS}/q/job/j"),
                _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": "j"}),
            ):
                assert (await _same(broken, case)).status_code == 503
    finally:
        await down.stop()


# -- the access log and the metrics ----------------------------------------------------------


@pytest.fixture
async def logging_on(runtime: Runtime, caplog: pytest.LogCaptureFixture) -> AsyncIterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    await runtime.access_log_switch.set(True)
    try:
        yield caplog
    finally:
        await runtime.access_log_switch.set(False)


def _line(record: logging.LogRecord) -> tuple[int, str, dict[str, Any]]:
    fields = {key: value for key, value in getattr(record, ACCESS_FIELDS).items() if key != "latency"}
    text = re.sub(r" [0-9.]+ms ", " *ms ", record.getMessage())
    return record.levelno, text, fields


def _http_samples() -> dict[tuple[str, str], float]:
    """The HTTP families' counts (histogram counts, not their latency buckets or sums)."""
    metrics.flush()
    found = {}
    for line in metrics.exposition().decode().splitlines():
        if line.startswith(("lmstfy_http_request_duration_seconds_count", "infra_lmstfy_http_")) and (
            "_bucket" not in line and "_sum" not in line
        ):
            name, _, value = line.rpartition(" ")
            found[(name.split("{")[0], name)] = float(value)
    return found


def _grown(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict[str, float]:
    return {key[1]: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)}


def _after_a_publish(case: Case) -> Case:
    """`case`, once a job is ready in queue q (published by the store: no request of its own)."""

    async def published_first(client: httpx.AsyncClient, runtime: Runtime, token: str) -> httpx.Response:
        await runtime.pools.get("default").publish(NS, "q", NewJob(b"ready"))
        return await case(client, runtime, token)

    return published_first


LOGGED = {
    "publish": _publish({"token": "{token}", "delay": 0}, X_Token=None, X_Request_ID="same-id"),
    "publish refused": _publish({"tries": 0}, X_Request_ID="same-id"),
    "no token": _publish(X_Token=None, X_Request_ID="same-id"),
    "unknown pool": _publish(X_Token="nopool:abc", X_Request_ID="same-id"),
    "consume": _after_a_publish(_with_token("GET", f"/api/{NS}/q", {"ttr": 5}, X_Request_ID="same-id")),
    "empty consume": _with_token("GET", f"/api/{NS}/empty", X_Request_ID="same-id"),
    "acking consume": _after_a_publish(_with_token("GET", f"/api/{NS}/q", {"ack": "q:j1"}, X_Request_ID="same-id")),
    "refused ack": _with_token("GET", f"/api/{NS}/q", {"ack": "j1"}, X_Request_ID="same-id"),
    "ack": _with_token("DELETE", f"/api/{NS}/q/job/j1", X_Request_ID="same-id"),
    "batch ack": _with_token("DELETE", f"/api/{NS}/q/jobs", {"job_id": "j1"}, X_Request_ID="same-id"),
    "oversize": _publish(body=BIG, X_Request_ID="same-id"),
}


@pytest.mark.parametrize("name", LOGGED)
async def test_the_access_log_and_metrics_of_a_lean_request_are_the_apps(
    pair: Pair, logging_on: pytest.LogCaptureFixture, name: str
) -> None:
    seen = []
    for client in (pair.plain, pair.lean):
        logging_on.clear()
        before = _http_samples()
        await LOGGED[name](client, pair.runtime, pair.token)
        [record] = [r for r in logging_on.records if r.name == LOGGER_NAME]
        seen.append((_line(record), _grown(before, _http_samples())))
    assert seen[1] == seen[0]
    assert seen[0][1]  # counted at all


async def _drain(pair: Pair) -> None:
    """Empties the queues the cases publish to, so a later consume finds only its own jobs."""
    for queue in ("q", "q2"):
        await pair.plain.delete(f"/api/{NS}/{queue}", headers=_auth(pair.token))
