"""Admin security: HTTP basic auth when accounts are configured, and the start-up warning when
the admin port is open to the network without them."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import free_port_besides
from benchmarks.harness.redis_servers import free_port
from lmstfy_py import __version__, server
from lmstfy_py import listeners as sockets
from lmstfy_py.admin.limits import Limit
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.engine import now_ms
from lmstfy_py.types import NewJob
from lmstfy_py.web import create_admin_app, create_data_app
from lmstfy_py.web.admin.auth import authorized, credentials
from tests.conftest import client_for
from tests.web.test_accesslog import running_server

ACCOUNTS = {"alice": "s3cret:with:colons", "bob": "pässwörd"}
CHALLENGE = 'Basic realm="lmstfy-py"'
TOKEN, NEW_TOKEN = "t" * 20, "u" * 20
DEAD = "<id of the seeded dead job>"  # filled in by `expected`
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the exposition format Prometheus scrapes
NOT_FOUND = (404, {"error": "api not found"})
# Every route behind the accounts, and its answer to an authorized caller on what `seed` stored:
# namespace ns with token TOKEN (limit read 1, write 2, interval 3), a ready job in queue q and a
# dead one (body b"dead", id DEAD).
ANSWERS: list[tuple[str, str, tuple[int, object]]] = [
    ("GET", "/info", (200, {"ns": ["q"]})),
    ("GET", "/token/ns", (200, {"tokens": {TOKEN: "seeded"}})),
    ("POST", f"/token/ns?description=d&token={NEW_TOKEN}", (201, {"token": NEW_TOKEN})),
    ("DELETE", f"/token/ns/{TOKEN}", (204, None)),
    ("GET", "/limits", (200, [{"namespace": "ns", "token": TOKEN, "limiter": {"read": 1, "write": 2, "interval": 3}}])),
    ("GET", f"/token/ns/{TOKEN}/limit", (200, {"read": 1, "write": 2, "interval": 3})),
    (
        "GET",
        "/namespaces",
        (
            200,
            {
                "pool": "default",
                "namespaces": [
                    {
                        "namespace": "ns",
                        "tokens": 1,
                        "timer_size": 0,
                        "queues": [{"queue": "q", "size": 1, "deadletter_size": 1}],
                    }
                ],
            },
        ),
    ),
    (
        "DELETE",
        "/namespaces/ns",  # without ?purge=true its jobs stay
        (200, {"namespace": "ns", "tokens_deleted": 1, "limits_deleted": 1, "jobs_deleted": 0}),
    ),
    (
        "GET",
        "/deadletter/ns/q",
        (
            200,
            {
                "namespace": "ns",
                "queue": "q",
                "deadletter_size": 1,
                "deadletter_head": DEAD,
                "jobs": [{"job_id": DEAD, "data": "ZGVhZA==", "ttl": 0, "attributes": None}],  # elapsed_ms aside
            },
        ),
    ),
    ("PUT", "/deadletter/ns/q", (200, {"msg": "respawned", "count": 1})),
    ("DELETE", "/deadletter/ns/q", (200, {"msg": "deleted", "count": 1})),
    ("GET", "/accesslog", (200, {"status": "disabled"})),
    ("POST", "/accesslog?status=enable", (200, {"status": "enabled"})),
    ("GET", "/nowhere", NOT_FOUND),  # unknown routes do not reveal themselves either
    ("POST", "/pools", NOT_FOUND),  # a public path with another method
]
PROTECTED = [(method, path) for method, path, _ in ANSWERS]


def basic(user: str | bytes, password: str | bytes) -> dict[str, str]:
    raw = (user if isinstance(user, bytes) else user.encode()) + b":"
    raw += password if isinstance(password, bytes) else password.encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


@pytest.fixture
async def secured(redis_url: str) -> AsyncIterator[Runtime]:
    config = Config(pools={"default": PoolConfig("default", url=redis_url)}, accounts=ACCOUNTS)
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        yield runtime
    finally:
        await runtime.stop()


@pytest.fixture
async def admin(secured: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_admin_app(secured)) as client:
        yield client


async def seed(runtime: Runtime) -> str:
    """The state ANSWERS expects; the dead job's id."""
    await runtime.tokens.create("default", "ns", "seeded", TOKEN)
    await runtime.limits.create("default", "ns", TOKEN, Limit(read=1, write=2, interval=3))
    engine = runtime.pools.get("default")
    dead = (await engine.publish("ns", "q", NewJob(b"dead"))).job_id
    await engine.consume("ns", ["q"], ttr_ms=0, timeout_ms=0, count=1)  # its one try, ended at once
    await engine.pump("ns", now_ms() + 1)  # no try left: to the dead letter
    await engine.publish("ns", "q", NewJob(b"ready"))
    return dead


def expected(answer: tuple[int, object], dead: str) -> tuple[int, object]:
    status, body = answer
    return status, json.loads(json.dumps(body).replace(json.dumps(DEAD), json.dumps(dead)))


def answered(response: httpx.Response) -> tuple[int, object]:
    """Status and JSON body (None when empty); a dead job's elapsed_ms, which the clock decides, left out."""
    body = response.json() if response.content else None
    for job in body.get("jobs", []) if isinstance(body, dict) else []:
        elapsed_ms = job.pop("elapsed_ms")
        assert isinstance(elapsed_ms, int) and elapsed_ms >= 0
    return response.status_code, body


def assert_unauthorized(response: httpx.Response) -> None:
    assert (response.status_code, response.json()) == (401, {"error": "unauthorized"})
    assert response.headers["www-authenticate"] == CHALLENGE
    assert response.headers["x-request-id"]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
async def test_every_other_route_needs_credentials(admin: httpx.AsyncClient, method: str, path: str) -> None:
    assert_unauthorized(await admin.request(method, path))


@pytest.mark.parametrize(
    "headers",
    [
        basic("alice", "wrong"),
        basic("alice", ""),
        basic("alice", ACCOUNTS["bob"]),  # another account's password
        basic("mallory", ACCOUNTS["alice"]),  # a wrong user with a right password
        basic("", ""),
        basic("Alice", ACCOUNTS["alice"]),
        basic("alice", ACCOUNTS["alice"] + "x"),
        basic("alice", ACCOUNTS["alice"].split(":")[0]),
        {"Authorization": "Basic " + base64.b64encode(b"alice").decode()},  # no colon
        {"Authorization": "Basic !!!not base64!!!"},
        {"Authorization": "Bearer " + base64.b64encode(b"alice:" + ACCOUNTS["alice"].encode()).decode()},
        {"Authorization": "Basic"},
    ],
)
async def test_wrong_credentials(admin: httpx.AsyncClient, headers: dict[str, str]) -> None:
    assert_unauthorized(await admin.get("/token/ns", headers=headers))


async def test_right_credentials_of_each_account(admin: httpx.AsyncClient) -> None:
    for user, password in ACCOUNTS.items():
        response = await admin.get("/token/ns", headers=basic(user, password))
        assert (response.status_code, response.json()) == (200, {"tokens": {}})
    created = await admin.post("/token/ns", params={"description": "d"}, headers=basic("alice", ACCOUNTS["alice"]))
    assert created.status_code == 201 and len(created.json()["token"]) >= 20
    # httpx's own basic auth, as a client library sends it (the scheme in any case).
    response = await admin.get("/namespaces", auth=("bob", ACCOUNTS["bob"]))
    assert response.status_code == 200 and response.json()["namespaces"][0]["namespace"] == "ns"
    lower = {"Authorization": basic("alice", ACCOUNTS["alice"])["Authorization"].replace("Basic", "basic")}
    info = await admin.get("/info", headers=lower)
    assert (info.status_code, info.json()) == (200, {})  # a token alone makes no queue


@pytest.mark.parametrize(("method", "path", "answer"), ANSWERS)
async def test_an_authorized_caller_gets_each_routes_answer(
    secured: Runtime, admin: httpx.AsyncClient, method: str, path: str, answer: tuple[int, object]
) -> None:
    dead = await seed(secured)
    response = await admin.request(method, path, headers=basic("bob", ACCOUNTS["bob"]))
    assert answered(response) == expected(answer, dead)


async def test_public_routes_stay_open(admin: httpx.AsyncClient) -> None:
    version = await admin.get("/version")
    assert (version.status_code, version.json()["version"]) == (200, __version__)
    assert (await admin.get("/pools")).json() == ["default"]
    assert (await admin.get("/ready")).json() == {"ready": True, "pools": {"default": "ok"}}
    # /metrics names every namespace and queue: it needs an account unless metrics_public (test_metrics).
    assert (await admin.get("/metrics")).status_code == 401
    # Wrong credentials on a public route are ignored, not refused.
    assert (await admin.get("/version", headers=basic("alice", "wrong"))).json() == version.json()


async def test_the_data_plane_ignores_admin_accounts(secured: Runtime) -> None:
    async with client_for(create_data_app(secured)) as data:
        response = await data.get("/api/ns/q/size")
    assert (response.status_code, response.json()) == (200, {"namespace": "ns", "queue": "q", "size": 0})


@pytest.fixture
def open_runtime(standalone_web_runtime: Runtime) -> Runtime:
    return standalone_web_runtime


@pytest.mark.parametrize(("method", "path", "answer"), ANSWERS)
async def test_no_accounts_means_every_route_answers_without_credentials(
    open_runtime: Runtime, method: str, path: str, answer: tuple[int, object]
) -> None:
    dead = await seed(open_runtime)
    async with client_for(create_admin_app(open_runtime)) as admin:
        assert answered(await admin.request(method, path)) == expected(answer, dead)


MUTATING = [(method, path, answer) for method, path, answer in ANSWERS if method not in ("GET", "HEAD")]
FROM_ANOTHER_SITE = [
    {"Origin": "http://evil.test"},
    {"Origin": "https://test"},  # another scheme is another origin
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain is not this origin either
]
CROSS_SITE_REFUSED = (403, {"error": "refused: a request from another site"})


@pytest.mark.parametrize("headers", FROM_ANOTHER_SITE)
@pytest.mark.parametrize(("method", "path", "answer"), MUTATING)
async def test_a_change_a_browser_sends_from_another_site_is_refused(
    open_runtime: Runtime, method: str, path: str, answer: tuple[int, object], headers: dict[str, str]
) -> None:
    # Without accounts (lmstfy's default) nothing else would stop a page on any site from making a
    # visitor's browser POST here; with accounts, the browser would add the dashboard's credentials.
    dead = await seed(open_runtime)
    async with client_for(create_admin_app(open_runtime)) as admin:
        assert answered(await admin.request(method, path, headers=headers)) == CROSS_SITE_REFUSED
        # Nothing changed: the same request from a program gets the answer the seeded state gives.
        assert answered(await admin.request(method, path)) == expected(answer, dead)


async def test_reads_and_same_origin_requests_from_a_browser_pass(open_runtime: Runtime) -> None:
    await seed(open_runtime)
    async with client_for(create_admin_app(open_runtime)) as admin:
        read = await admin.get("/token/ns", headers={"Origin": "http://evil.test", "Sec-Fetch-Site": "cross-site"})
        assert read.status_code == 200  # a page cannot read the answer: no CORS
        for headers in ({"Origin": "http://test", "Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}):
            made = await admin.post("/token/ns", params={"description": "from the same origin"}, headers=headers)
            assert made.status_code == 201, made.text


def test_credentials_parsing() -> None:
    assert credentials(basic("alice", "a:b")["Authorization"]) == (b"alice", b"a:b")
    assert credentials(basic("bob", "pässwörd")["Authorization"]) == (b"bob", "pässwörd".encode())
    assert credentials(None) is None
    assert credentials("Basic " + base64.b64encode(b"nocolon").decode()) is None
    assert credentials("Digest abc") is None


def test_authorized_needs_user_and_password_of_the_same_account() -> None:
    assert authorized(ACCOUNTS, b"alice", ACCOUNTS["alice"].encode())
    assert authorized(ACCOUNTS, b"bob", ACCOUNTS["bob"].encode())
    assert not authorized(ACCOUNTS, b"alice", ACCOUNTS["bob"].encode())
    assert not authorized({}, b"", b"")


# -- the start-up warning ------------------------------------------------------------------


def _listeners(admin_host: str) -> sockets.Listeners:
    return sockets.Listeners(
        sockets.listen("127.0.0.1", (port := free_port()), "data API"),
        sockets.listen(admin_host, free_port_besides(port), "admin API"),
    )


@pytest.mark.parametrize(
    ("admin_host", "accounts", "warns"),
    [
        ("0.0.0.0", {}, True),
        ("0.0.0.0", ACCOUNTS, False),
        ("127.0.0.1", {}, False),
        ("127.0.0.2", {}, False),  # all of 127/8 is loopback
    ],
)
def test_exposure_warning(admin_host: str, accounts: dict[str, str], warns: bool) -> None:
    listeners = _listeners(admin_host)
    try:
        warning = server.exposure_warning(Config(accounts=accounts), listeners)
    finally:
        listeners.close()
    assert (warning is not None) is warns
    if warning is not None:
        assert "[admin.accounts]" in warning and "--admin-host 127.0.0.1" in warning


def test_exposure_warning_on_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        listeners = _listeners("::")
    except sockets.ListenError:
        pytest.skip("cannot listen on ::")
    try:
        assert server.exposure_warning(Config(), listeners) is not None
    finally:
        listeners.close()


def test_a_server_warns_at_start_when_the_admin_port_is_exposed(tmp_path: Path, redis_url: str) -> None:
    with running_server(tmp_path, redis_url, "--admin-host", "0.0.0.0") as exposed:
        stderr = exposed.stderr()
    assert "warning: the admin API listens on http://0.0.0.0:" in stderr
    with running_server(tmp_path, redis_url) as loopback:
        assert "warning" not in loopback.stderr()
