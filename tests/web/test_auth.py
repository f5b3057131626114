"""Admin security: HTTP basic auth when accounts are configured, and the start-up warning when
the admin port is open to the network without them."""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from lmstfy_py import listeners as sockets
from lmstfy_py import server
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app, create_data_app
from lmstfy_py.web.admin.auth import authorized, credentials
from tests.conftest import client_for
from tests.redis_procs import free_port
from tests.web.test_accesslog import running_server

ACCOUNTS = {"alice": "s3cret:with:colons", "bob": "pässwörd"}
CHALLENGE = 'Basic realm="lmstfy-py"'
PROTECTED = [
    ("GET", "/info"),
    ("GET", "/token/ns"),
    ("POST", "/token/ns?description=d"),
    ("DELETE", "/token/ns/" + "t" * 20),
    ("GET", "/limits"),
    ("GET", "/token/ns/" + "t" * 20 + "/limit"),
    ("GET", "/namespaces"),
    ("DELETE", "/namespaces/ns"),
    ("GET", "/deadletter/ns/q"),
    ("PUT", "/deadletter/ns/q"),
    ("DELETE", "/deadletter/ns/q"),
    ("GET", "/accesslog"),
    ("POST", "/accesslog?status=enable"),
    ("GET", "/nowhere"),  # unknown routes do not reveal themselves either
    ("POST", "/pools"),  # a public path with another method
]


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
    assert created.status_code == 201
    # httpx's own basic auth, as a client library sends it (the scheme in any case).
    response = await admin.get("/namespaces", auth=("bob", ACCOUNTS["bob"]))
    assert response.status_code == 200 and response.json()["namespaces"][0]["namespace"] == "ns"
    lower = {"Authorization": basic("alice", ACCOUNTS["alice"])["Authorization"].replace("Basic", "basic")}
    assert (await admin.get("/info", headers=lower)).status_code == 200


async def test_public_routes_stay_open(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/version")).status_code == 200
    assert (await admin.get("/pools")).json() == ["default"]
    assert (await admin.get("/metrics")).status_code != 401
    # Wrong credentials on a public route are ignored, not refused.
    assert (await admin.get("/version", headers=basic("alice", "wrong"))).status_code == 200


async def test_the_data_plane_ignores_admin_accounts(secured: Runtime) -> None:
    async with client_for(create_data_app(secured)) as data:
        assert (await data.get("/api/ns/q/size")).status_code == 200


async def test_no_accounts_means_every_route_is_open(redis_url: str) -> None:
    runtime = await Runtime.start(Config(pools={"default": PoolConfig("default", url=redis_url)}), run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            for method, path in PROTECTED:
                assert (await admin.request(method, path)).status_code != 401, (method, path)
    finally:
        await runtime.stop()


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
        sockets.listen("127.0.0.1", free_port(), "data API"), sockets.listen(admin_host, free_port(), "admin API")
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
