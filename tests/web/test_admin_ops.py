"""Admin routes for operators: namespaces (list, delete, purge) and dead letters (peek, respawn, delete).

Every test runs on a standalone Redis and on a Redis Cluster (the `runtime` fixture), so a purge
that touched two hash slots in one script would fail on the cluster run.
"""

from __future__ import annotations

import base64
import functools
from typing import Any

import httpx
import pytest

from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.store.engine import CHUNK, Engine
from lmstfy_py.types import NewJob
from tests.web.conftest import Api, MakeToken, auth, wait_for

NS = "ns"


def engine_of(runtime: Runtime) -> Engine:
    return runtime.pools.get("default")


async def namespace_keys(runtime: Runtime, ns: str) -> set[str]:
    """Every key of the namespace, and the pool-wide records naming it."""
    redis = engine_of(runtime).redis
    found = {key.decode() async for key in redis.scan_iter(match=f"*{{{ns}}}*")}
    if await redis.sismember(keys.NAMESPACES, ns):
        found.add(keys.NAMESPACES)
    if await redis.zscore(keys.DUE_INDEX, ns) is not None:
        found.add(keys.DUE_INDEX)
    if await redis.exists(keys.tokens("default", ns)):
        found.add(keys.tokens("default", ns))
    if await redis.sismember(keys.token_namespaces("default"), ns):
        found.add(keys.token_namespaces("default"))
    return found


async def kill(api: Api, queue: str, count: int, **headers: str) -> list[str]:
    """`count` jobs of `queue` driven into its dead letter (ttr=0 expires at once), oldest first."""
    job_ids = []
    for i in range(count):
        response = await api.client.put(
            f"/api/{NS}/{queue}", content=f"dead {i}".encode(), headers={**api.headers, **headers}
        )
        job_ids.append(response.json()["job_id"])
        consumed = await api.client.get(f"/api/{NS}/{queue}", params={"ttr": 0, "timeout": 2}, headers=api.headers)
        assert consumed.json()["job_id"] == job_ids[-1]
        await wait_for(functools.partial(dead_size_is, api, queue, i + 1))
    return job_ids


async def dead_size_is(api: Api, queue: str, size: int) -> bool:
    response = await api.client.get(f"/api/{NS}/{queue}/deadletter/size")
    found: int = response.json()["size"]
    return found == size


def assert_error(response: httpx.Response, status: int, error: str) -> None:
    assert (response.status_code, response.json()) == (status, {"error": error})


# -- GET /namespaces -------------------------------------------------------------------


async def test_list_namespaces_when_there_are_none(admin: httpx.AsyncClient) -> None:
    response = await admin.get("/namespaces")
    assert (response.status_code, response.json()) == (200, {"pool": "default", "namespaces": []})


async def test_list_namespaces_counts_tokens_timers_and_queues(
    admin: httpx.AsyncClient, api: Api, make_token: MakeToken, runtime: Runtime
) -> None:
    await kill(api, "q", 1)
    await api.publish("q")
    await api.publish("q")
    await api.publish("later", delay=60)
    await make_token(NS)  # a second token
    await make_token("tokens-only")
    await engine_of(runtime).publish("jobs-only", "q", NewJob(b"x"))

    response = await admin.get("/namespaces", params={"pool": "default"})
    assert response.status_code == 200
    assert response.json() == {
        "pool": "default",
        "namespaces": [
            {"namespace": "jobs-only", "tokens": 0, "timer_size": 0, "queues": [_queue("q", 1, 0)]},
            {
                "namespace": NS,
                "tokens": 2,
                "timer_size": 1,
                "queues": [_queue("later", 0, 0), _queue("q", 2, 1)],
            },
            {"namespace": "tokens-only", "tokens": 1, "timer_size": 0, "queues": []},
        ],
    }


def _queue(name: str, size: int, dead: int) -> dict[str, Any]:
    return {"queue": name, "size": size, "deadletter_size": dead}


async def test_list_namespaces_of_an_unknown_pool(admin: httpx.AsyncClient) -> None:
    assert_error(await admin.get("/namespaces", params={"pool": "nope"}), 400, "pool not found")


# -- DELETE /namespaces/{ns} -------------------------------------------------------------


async def test_delete_namespace_keeps_jobs_but_revokes_every_token(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, api: Api, token: str, make_token: MakeToken
) -> None:
    second = await make_token(NS)
    other = await make_token("other")
    await api.publish("q")

    response = await admin.delete(f"/namespaces/{NS}")
    assert (response.status_code, response.json()) == (
        200,
        {"namespace": NS, "tokens_deleted": 2, "limits_deleted": 0, "jobs_deleted": 0},
    )
    for revoked in (token, second):
        assert_error(await data.put(f"/api/{NS}/q", headers=auth(revoked)), 401, "invalid token")
    assert (await data.put("/api/other/q", headers=auth(other))).status_code == 201
    assert await api.size() == 1  # purge=false: the jobs stay
    assert (await admin.get(f"/token/{NS}")).json() == {"tokens": {}}
    [listed] = [n for n in (await admin.get("/namespaces")).json()["namespaces"] if n["namespace"] == NS]
    assert (listed["tokens"], listed["queues"]) == (0, [_queue("q", 1, 0)])


async def test_delete_namespace_deletes_the_limits_of_its_tokens(
    admin: httpx.AsyncClient, token: str, make_token: MakeToken
) -> None:
    other = await make_token("other")
    limit = {"read": 10, "write": 5, "interval": 1}
    for ns, limited in ((NS, token), (NS, "never-issued-token-0000"), ("other", other)):
        assert (await admin.post(f"/token/{ns}/{limited}/limit", json=limit)).status_code == 201

    response = await admin.delete(f"/namespaces/{NS}")
    assert response.json() == {"namespace": NS, "tokens_deleted": 1, "limits_deleted": 2, "jobs_deleted": 0}
    assert [entry["namespace"] for entry in (await admin.get("/limits")).json()] == ["other"]


async def test_delete_namespace_with_purge_leaves_no_key_behind(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, api: Api, make_token: MakeToken, runtime: Runtime
) -> None:
    other_token = await make_token("other")
    await data.put("/api/other/q", content=b"keep me", params={"delay": 60}, headers=auth(other_token))
    await kill(api, "q", 2, **{"Enable-Job-Version": "YES", "Job-Attr-Trace": "t1"})
    await api.publish("q")  # ready
    await api.publish("q2", delay=60)  # delayed
    await api.publish("q3")
    await api.consume_job("q3", ttr=600)  # reserved
    await api.publish("q4", ttl=60)  # ready, expiring
    assert await namespace_keys(runtime, NS)

    response = await admin.delete(f"/namespaces/{NS}", params={"purge": "true"})
    assert (response.status_code, response.json()) == (
        200,
        {"namespace": NS, "tokens_deleted": 1, "limits_deleted": 0, "jobs_deleted": 6},
    )
    assert await namespace_keys(runtime, NS) == set()
    assert NS not in (await admin.get("/info")).json()
    assert [n["namespace"] for n in (await admin.get("/namespaces")).json()["namespaces"]] == ["other"]
    # The other namespace is untouched.
    assert (await engine_of(runtime).timer_size("other")) == 1
    assert (await data.get("/api/other/q", params={"timeout": 0}, headers=auth(other_token))).status_code == 404


async def test_purge_runs_in_chunks(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = engine_of(runtime)
    many = CHUNK + CHUNK // 2
    await engine.publish_many(NS, "ready", [NewJob(b"r")] * many)
    await engine.publish_many(NS, "delayed", [NewJob(b"d", delay_ms=60_000)] * many)

    response = await admin.delete(f"/namespaces/{NS}", params={"purge": "true"})
    assert response.json() == {"namespace": NS, "tokens_deleted": 0, "limits_deleted": 0, "jobs_deleted": 2 * many}
    assert await namespace_keys(runtime, NS) == set()


async def test_a_purged_namespace_can_be_used_again(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, api: Api, make_token: MakeToken
) -> None:
    await api.publish("q")
    assert (await admin.delete(f"/namespaces/{NS}", params={"purge": "true"})).status_code == 200
    fresh = await make_token(NS)
    assert (await data.put(f"/api/{NS}/q", content=b"new", headers=auth(fresh))).status_code == 201
    assert (await admin.get("/info")).json() == {NS: ["q"]}


@pytest.mark.parametrize(
    ("path", "query", "error"),
    [
        (f"/namespaces/{NS}", {"purge": "yes"}, "invalid purge"),
        (f"/namespaces/{NS}", {"purge": ""}, "invalid purge"),
        (f"/namespaces/{NS}", {"purge": "TRUE"}, "invalid purge"),
        (f"/namespaces/{NS}", {"pool": "nope"}, "pool not found"),
        ("/namespaces/bad.name", {}, "namespace name contains forbidden characters"),
        ("/namespaces/" + "n" * 256, {}, "the namespace name was too long"),
    ],
)
async def test_delete_namespace_refuses_bad_input_before_deleting(
    admin: httpx.AsyncClient, token: str, path: str, query: dict[str, str], error: str
) -> None:
    assert_error(await admin.delete(path, params=query), 400, error)
    assert token in (await admin.get(f"/token/{NS}")).json()["tokens"]


async def test_delete_an_unknown_namespace(admin: httpx.AsyncClient) -> None:
    response = await admin.delete("/namespaces/ghost", params={"purge": "false"})
    assert response.json() == {"namespace": "ghost", "tokens_deleted": 0, "limits_deleted": 0, "jobs_deleted": 0}


# -- /deadletter/{ns}/{q} ----------------------------------------------------------------


async def test_peek_dead_letter_shows_the_oldest_jobs_first(admin: httpx.AsyncClient, api: Api) -> None:
    killed = await kill(api, "q", 3, **{"Enable-Job-Version": "YES", "Job-Attr-Trace": "abc"})
    response = await admin.get(f"/deadletter/{NS}/q", params={"limit": 2})
    assert response.status_code == 200
    body = response.json()
    assert {k: v for k, v in body.items() if k != "jobs"} == {
        "namespace": NS,
        "queue": "q",
        "deadletter_size": 3,
        "deadletter_head": killed[0],
    }
    assert [job["job_id"] for job in body["jobs"]] == killed[:2]
    first = body["jobs"][0]
    assert set(first) == {"job_id", "data", "ttl", "elapsed_ms", "attributes"}
    assert base64.b64decode(first["data"]) == b"dead 0"
    assert (first["ttl"], first["attributes"]) == (0, {"trace": "abc"})  # dead jobs never expire
    assert first["elapsed_ms"] >= 0
    assert len((await admin.get(f"/deadletter/{NS}/q")).json()["jobs"]) == 3  # default limit 10
    assert await api.dead_size() == 3  # peeking changes nothing


async def test_peek_an_empty_dead_letter(admin: httpx.AsyncClient) -> None:
    response = await admin.get(f"/deadletter/{NS}/q")
    assert response.json() == {"namespace": NS, "queue": "q", "deadletter_size": 0, "deadletter_head": "", "jobs": []}


async def test_respawn_dead_letter(admin: httpx.AsyncClient, api: Api) -> None:
    killed = await kill(api, "q", 3)
    response = await admin.put(f"/deadletter/{NS}/q", params={"limit": 2, "ttl": 30})
    assert (response.status_code, response.json()) == (200, {"msg": "respawned", "count": 2})
    assert await api.dead_size() == 1
    job = await api.consume_job()
    assert (job["job_id"], job["remain_tries"]) == (killed[0], 0)
    assert 0 < int(job["ttl"]) <= 30  # type: ignore[call-overload]
    response = await admin.put(f"/deadletter/{NS}/q", params={"limit": 10})
    assert response.json() == {"msg": "respawned", "count": 1}
    assert (await admin.put(f"/deadletter/{NS}/q")).json() == {"msg": "respawned", "count": 0}


async def test_delete_dead_letter_says_how_many(admin: httpx.AsyncClient, api: Api) -> None:
    killed = await kill(api, "q", 3)
    response = await admin.delete(f"/deadletter/{NS}/q")  # limit 1
    assert (response.status_code, response.json()) == (200, {"msg": "deleted", "count": 1})
    assert (await admin.get(f"/deadletter/{NS}/q")).json()["deadletter_head"] == killed[1]
    assert (await admin.delete(f"/deadletter/{NS}/q", params={"limit": 5})).json() == {"msg": "deleted", "count": 2}
    assert (await api.get(f"/job/{killed[2]}")).status_code == 404  # the data went too


@pytest.mark.parametrize(
    ("method", "query", "error"),
    [
        ("GET", {"limit": "0"}, "invalid limit"),
        ("GET", {"limit": "101"}, "invalid limit"),
        ("GET", {"limit": "-1"}, "invalid limit"),
        ("PUT", {"limit": "0"}, "invalid limit"),
        ("PUT", {"limit": "x"}, "invalid limit"),
        ("PUT", {"ttl": "-1"}, "invalid ttl"),
        ("PUT", {"ttl": str(2**32)}, "invalid ttl"),
        ("DELETE", {"limit": "0"}, "invalid limit"),
        ("DELETE", {"limit": "1.0"}, "invalid limit"),
        ("GET", {"pool": "nope"}, "pool not found"),
        ("PUT", {"pool": "nope"}, "pool not found"),
        ("DELETE", {"pool": "nope"}, "pool not found"),
    ],
)
async def test_dead_letter_routes_refuse_bad_parameters(
    admin: httpx.AsyncClient, api: Api, method: str, query: dict[str, str], error: str
) -> None:
    await kill(api, "q", 1)
    assert_error(await admin.request(method, f"/deadletter/{NS}/q", params=query), 400, error)
    assert await api.dead_size() == 1


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/deadletter/bad.ns/q", "namespace name contains forbidden characters"),
        (f"/deadletter/{NS}/_q", "queue name contains forbidden characters"),
        (f"/deadletter/{NS}/" + "q" * 256, "namespace or queue name too long"),
    ],
)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_dead_letter_routes_refuse_bad_names(
    admin: httpx.AsyncClient, method: str, path: str, error: str
) -> None:
    assert_error(await admin.request(method, path), 400, error)
