"""Throttle limits: the admin routes, and 429 on the data plane once a token's window is used up.

Runs on a standalone Redis and on a Redis Cluster (the `runtime` fixture). Several processes
sharing one limit are tested in tests/e2e/test_throttle_e2e.py.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import httpx
import pytest

from lmstfy_py.admin.limits import Limit
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.web import create_admin_app, create_data_app
from tests.conftest import client_for
from tests.web.conftest import Api, MakeToken, auth

LONG_TOKEN = "0123456789abcdefghij"
# For tests of parsing or of waiting: what they check does not depend on the Redis deployment.
standalone_only = pytest.mark.parametrize("pool_config", ["standalone"], indirect=True)


async def set_limit(admin: httpx.AsyncClient, token: str, method: str = "POST", ns: str = "ns", **limit: int) -> None:
    response = await admin.request(method, f"/token/{ns}/{token}/limit", json=limit)
    assert response.status_code == (201 if method == "POST" else 200), response.text
    assert response.json() == {"limiter": {"read": 0, "write": 0, **limit}}


def throttled(token: str, action: str) -> dict[str, str]:
    # lmstfy's text names the token itself; ours its hash, as metrics do (a 429 body may be logged by a proxy).
    hashed = hashlib.sha256(token.encode()).hexdigest()[:12]
    return {"msg": f"token({hashed}) {action} reach the limit rate, please retry later"}


async def publish(api: Api, **query: int) -> httpx.Response:
    return await api.client.put("/api/ns/q", content=b"job", params=query, headers=api.headers)


# -- the admin routes ------------------------------------------------------------------


async def test_create_read_update_delete_a_limit(admin: httpx.AsyncClient, token: str) -> None:
    path = f"/token/ns/{token}/limit"
    assert (await admin.get("/limits")).json() == []
    response = await admin.get(path)
    assert (response.status_code, response.json()) == (404, {"error": "limit not found"})

    await set_limit(admin, token, read=10, write=5, interval=2)
    response = await admin.get(path)
    assert (response.status_code, response.json()) == (200, {"read": 10, "write": 5, "interval": 2})
    response = await admin.post(path, json={"read": 1, "interval": 1})
    assert (response.status_code, response.json()) == (400, {"error": "the limit has already existed"})

    await set_limit(admin, token, "PUT", write=7, interval=3)  # an absent field is 0, as in lmstfy
    listed = [{"namespace": "ns", "token": token, "limiter": {"read": 0, "write": 7, "interval": 3}}]
    assert (await admin.get("/limits")).json() == listed

    for _ in range(2):  # deleting is idempotent, as in lmstfy
        response = await admin.delete(path)
        assert (response.status_code, response.json()) == (200, {"msg": "success"})
    assert (await admin.get(path)).status_code == 404
    assert (await admin.get("/limits")).json() == []


async def test_put_creates_a_missing_limit(admin: httpx.AsyncClient, token: str) -> None:
    await set_limit(admin, token, "PUT", read=3, interval=1)
    assert (await admin.get(f"/token/ns/{token}/limit")).json() == {"read": 3, "write": 0, "interval": 1}


async def test_limits_are_listed_in_order(admin: httpx.AsyncClient, make_token: MakeToken) -> None:
    tokens = sorted([await make_token("b"), await make_token("a"), await make_token("a")])
    for i, token in enumerate(tokens):
        await set_limit(admin, token, ns="a" if i < 2 else "b", read=i + 1, interval=1)
    listed = [(entry["namespace"], entry["token"]) for entry in (await admin.get("/limits")).json()]
    assert listed == [("a", tokens[0]), ("a", tokens[1]), ("b", tokens[2])]


BAD_BODIES: list[tuple[Any, str]] = [
    (b"{", "the limit should be a JSON object"),
    (b"", "the limit should be a JSON object"),
    (b"\xff", "the limit should be a JSON object"),
    ([1, 2, 3], "the limit should be a JSON object"),
    ("read", "the limit should be a JSON object"),
    ({"read": -1, "write": 1, "interval": 1}, "invalid read: should be an integer from 0 to 4294967295"),
    ({"read": 1.5, "interval": 1}, "invalid read: should be an integer from 0 to 4294967295"),
    ({"read": 1.0, "interval": 1}, "invalid read: should be an integer from 0 to 4294967295"),
    ({"write": True, "interval": 1}, "invalid write: should be an integer from 0 to 4294967295"),
    ({"write": "5", "interval": 1}, "invalid write: should be an integer from 0 to 4294967295"),
    ({"write": 1, "interval": 2**32}, "invalid interval: should be an integer from 0 to 4294967295"),
    ({"write": 1, "interval": -1}, "invalid interval: should be an integer from 0 to 4294967295"),
    ({"read": 0, "write": 0, "interval": 1}, "the read and write of the limit can't both be 0"),
    ({"interval": 1}, "the read and write of the limit can't both be 0"),
    ({"read": 1, "write": 1, "interval": 0}, "interval should be > 0"),
    ({"read": 1, "write": 1}, "interval should be > 0"),
]


@standalone_only
@pytest.mark.parametrize(("body", "error"), BAD_BODIES)
@pytest.mark.parametrize("method", ["POST", "PUT"])
async def test_a_bad_limit_is_refused(admin: httpx.AsyncClient, token: str, method: str, body: Any, error: str) -> None:
    content = body if isinstance(body, bytes) else None
    as_json = None if isinstance(body, bytes) else body
    response = await admin.request(method, f"/token/ns/{token}/limit", content=content, json=as_json)
    assert (response.status_code, response.json()) == (400, {"error": error})
    assert (await admin.get("/limits")).json() == []


@standalone_only
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/token/n$s/tok/limit", "namespace name contains forbidden characters"),
        ("/token/ns/nowhere:tok/limit", "pool not found"),
        ("/token/ns/default:/limit", "invalid token"),
    ],
)
async def test_a_bad_path_is_refused(admin: httpx.AsyncClient, method: str, path: str, error: str) -> None:
    response = await admin.request(method, path, json={"read": 1, "interval": 1})
    assert (response.status_code, response.json()) == (400, {"error": error})


async def test_deleting_a_token_deletes_its_limit(admin: httpx.AsyncClient, data: httpx.AsyncClient) -> None:
    created = await admin.post("/token/ns", params={"description": "d", "token": LONG_TOKEN})
    assert created.status_code == 201
    await set_limit(admin, LONG_TOKEN, write=1, interval=60)
    assert (await admin.delete(f"/token/ns/{LONG_TOKEN}")).status_code == 204
    assert (await admin.get(f"/token/ns/{LONG_TOKEN}/limit")).status_code == 404
    # The same token created again starts without a limit.
    await admin.post("/token/ns", params={"description": "d", "token": LONG_TOKEN})
    for _ in range(2):
        assert (await data.put("/api/ns/q", headers=auth(LONG_TOKEN))).status_code == 201


# -- throttling ----------------------------------------------------------------------


async def test_the_write_after_the_limit_gets_429_until_the_window_ends(
    admin: httpx.AsyncClient, api: Api, token: str
) -> None:
    await set_limit(admin, token, write=3, interval=1)
    for _ in range(3):
        assert (await publish(api)).status_code == 201
    response = await publish(api)
    assert (response.status_code, response.json()) == (429, throttled(token, "produce"))
    bulk = await api.client.put("/api/ns/q/bulk", content=b"[1]", headers=api.headers)
    assert (bulk.status_code, bulk.json()) == (429, throttled(token, "produce"))
    assert (await api.consume()).status_code == 200  # reads are not limited (read = 0)
    await asyncio.sleep(1.05)
    assert (await publish(api)).status_code == 201


async def test_the_read_after_the_limit_gets_429(admin: httpx.AsyncClient, api: Api, token: str) -> None:
    for _ in range(3):
        await api.publish()
    await set_limit(admin, token, read=2, interval=60)
    for _ in range(2):
        assert (await api.consume()).status_code == 200
    response = await api.consume()
    assert (response.status_code, response.json()) == (429, throttled(token, "consume"))
    assert (await api.consume("q,other")).status_code == 429  # one token, whichever queues it reads
    assert (await publish(api)).status_code == 201  # writes are not limited (write = 0)


async def test_a_bulk_publish_counts_once(admin: httpx.AsyncClient, api: Api, token: str) -> None:
    await set_limit(admin, token, write=2, interval=60)
    for _ in range(2):
        response = await api.client.put("/api/ns/q/bulk", content=b"[1,2,3]", headers=api.headers)
        assert response.status_code == 201
    assert (await publish(api)).status_code == 429
    assert await api.size() == 6


async def test_failed_requests_do_not_use_up_the_limit(admin: httpx.AsyncClient, api: Api, token: str) -> None:
    await set_limit(admin, token, read=1, write=1, interval=60)
    for _ in range(3):
        assert (await api.consume()).status_code == 404  # no job available
        assert (await api.consume(ttr=-1)).status_code == 400
        assert (await publish(api, tries=0)).status_code == 400
        bad_bulk = await api.client.put("/api/ns/q/bulk", content=b"[]", headers=api.headers)
        assert bad_bulk.status_code == 400
    assert (await publish(api)).status_code == 201
    assert (await api.consume()).status_code == 200
    assert (await publish(api)).status_code == 429
    assert (await api.consume()).status_code == 429


@standalone_only
async def test_a_long_poll_that_ends_empty_gives_its_unit_back(admin: httpx.AsyncClient, api: Api, token: str) -> None:
    await set_limit(admin, token, read=1, interval=60)
    assert (await api.consume(timeout=1)).status_code == 404
    await api.publish()
    assert (await api.consume()).status_code == 200


async def test_other_tokens_and_namespaces_are_not_limited(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, make_token: MakeToken, api: Api, token: str
) -> None:
    await set_limit(admin, token, write=1, interval=60)
    assert (await publish(api)).status_code == 201
    assert (await publish(api)).status_code == 429
    other = await make_token("ns")
    elsewhere = await make_token("ns2")
    for _ in range(2):
        assert (await data.put("/api/ns/q", headers=auth(other))).status_code == 201
        assert (await data.put("/api/ns2/q", headers=auth(elsewhere))).status_code == 201


@standalone_only
async def test_a_changed_limit_applies_at_once_in_its_process(admin: httpx.AsyncClient, api: Api, token: str) -> None:
    await set_limit(admin, token, write=1, interval=3600)
    assert (await publish(api)).status_code == 201
    assert (await publish(api)).status_code == 429
    await set_limit(admin, token, "PUT", write=2, interval=3600)  # one more unit in the same window
    assert (await publish(api)).status_code == 201
    assert (await publish(api)).status_code == 429
    # A shorter interval shortens the window already open.
    await set_limit(admin, token, "PUT", write=2, interval=1)
    await asyncio.sleep(1.05)
    assert (await publish(api)).status_code == 201
    assert (await admin.delete(f"/token/ns/{token}/limit")).status_code == 200
    for _ in range(3):
        assert (await publish(api)).status_code == 201


async def test_a_token_without_a_limit_leaves_no_counter(runtime: Runtime, admin: httpx.AsyncClient, api: Api) -> None:
    other = (await admin.post("/token/ns", params={"description": "d"})).json()["token"]
    await set_limit(admin, other, read=5, interval=60)  # limits reads only
    for headers in (api.headers, auth(other)):
        assert (await api.client.put("/api/ns/q", headers=headers)).status_code == 201
    redis = runtime.pools.get("default").redis
    assert not await redis.exists(keys.throttle_counter("default", "ns", other, read=False))
    await api.consume()
    assert not await redis.exists(keys.throttle_counter("default", "ns", other, read=True))
    assert (await api.client.get("/api/ns/q", headers=auth(other))).status_code == 200
    assert await redis.exists(keys.throttle_counter("default", "ns", other, read=True))


# -- several pools and runtimes --------------------------------------------------------


async def test_a_token_of_another_pool(two_pools: Runtime) -> None:
    async with client_for(create_admin_app(two_pools)) as admin, client_for(create_data_app(two_pools)) as data:
        token = (await admin.post("/token/ns", params={"description": "d", "pool": "other"})).json()["token"]
        assert token.startswith("other:")
        bare = token.removeprefix("other:")
        await set_limit(admin, token, write=1, interval=60)
        listed = (await admin.get("/limits")).json()
        assert listed == [{"namespace": "ns", "token": token, "limiter": {"read": 0, "write": 1, "interval": 60}}]
        assert (await admin.get(f"/token/ns/{bare}/limit")).status_code == 404  # the default pool's token
        assert (await data.put("/api/ns/q", headers=auth(token))).status_code == 201
        response = await data.put("/api/ns/q", headers=auth(token))
        assert (response.status_code, response.json()) == (429, throttled(bare, "produce"))
        assert (await admin.delete(f"/token/ns/{token}")).status_code == 204
        assert (await admin.get("/limits")).json() == []


async def test_another_runtime_sees_changes_and_namespace_deletes(redis_url: str) -> None:
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    first, second = await Runtime.start(config, run_pumps=False), await Runtime.start(config, run_pumps=False)
    try:
        limit = Limit(read=1, write=2, interval=3)
        for token in ("t1", "t2"):
            await first.limits.create("default", "ns", token, limit)
        await first.limits.create("default", "ns2", "t1", limit)
        await second.limits.refresh()  # what its background loop does every REFRESH_S
        assert second.limits.table.get(("default", "ns", "t1")) == limit

        assert await first.limits.delete_namespace("default", "ns") == 2
        assert await first.limits.delete_namespace("default", "ns") == 0
        await second.limits.refresh()
        assert second.limits.table.get(("default", "ns", "t1")) is None
        assert [entry.namespace for entry in await second.limits.list_all()] == ["ns2"]
    finally:
        await first.stop()
        await second.stop()


def test_limit_keys_are_pinned() -> None:
    assert (keys.LIMITS, keys.LIMITS_VERSION) == ("lm/{limits}", "lmv/{limits}")
    assert keys.limit_field("default", "ns", "a:b/c") == "default/ns/a:b/c"
    assert keys.throttle_counter("p", "ns", "t", read=True) == "lc/p/ns/t/r"
    assert keys.throttle_counter("p", "ns", "t", read=False) == "lc/p/ns/t/w"
