"""DELETE /api/{ns}/{queue}/jobs?job_id=...: many ACKs in one request and one Lua call (beyond lmstfy).

Runs on standalone Redis and on both Redis Clusters (the `runtime` fixture): one script
touching keys of two slots would fail there with CROSSSLOT.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from lmstfy_py.config import PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import jobdata, keys, pools
from lmstfy_py.store.migration import MigrationEngine
from lmstfy_py.types import NewJob
from lmstfy_py.web.params import MAX_CONSUME_COUNT
from tests.metrics.test_metrics import Scrape
from tests.web.conftest import Api, MakeToken, auth

BATCH = "/api/ns/q/jobs"


async def batch_ack(api: Api, *job_id_values: str, path: str = BATCH) -> httpx.Response:
    """One DELETE with a `job_id` parameter per value (each value may hold several ids, comma-separated)."""
    return await api.client.delete(path, params=[("job_id", value) for value in job_id_values], headers=api.headers)


async def exists(api: Api, job_id: str, queue: str = "q") -> bool:
    response = await api.client.get(f"/api/ns/{queue}/job/{job_id}", headers=api.headers)
    assert response.status_code in (200, 404), response.text
    return response.status_code == 200


async def namespace_keys(runtime: Runtime) -> set[str]:
    """Every key of namespace "ns" (they all carry its hash tag)."""
    redis = runtime.pools.get("default").redis
    return {key.decode() async for key in redis.scan_iter(match="*{ns}*")}


async def publish_many(api: Api, count: int) -> list[str]:
    job_ids: list[str] = []
    while len(job_ids) < count:
        body = b"[" + b",".join([b"1"] * min(64, count - len(job_ids))) + b"]"
        response = await api.client.put("/api/ns/q/bulk", content=body, headers=api.headers)
        assert response.status_code == 201, response.text
        job_ids += response.json()["job_ids"]
    return job_ids


# -- what it removes -----------------------------------------------------------------------


async def test_one_batch_removes_jobs_in_every_state_and_leaves_no_key(api: Api, runtime: Runtime) -> None:
    dead = await api.kill_one()  # first: kill_one consumes the oldest ready job
    reserved = await api.publish()
    assert (await api.consume_job(ttr=60))["job_id"] == reserved
    ready = await api.publish()
    delayed = await api.publish(delay=60)
    engine = runtime.pools.get("default")
    assert (await engine.timer_size("ns"), await api.size(), await api.dead_size()) == (2, 1, 1)

    response = await batch_ack(api, f"{dead},{reserved}", ready, delayed)
    assert response.status_code == 204 and response.content == b""

    for job_id in (dead, reserved, ready, delayed):
        assert not await exists(api, job_id), job_id
    assert (await engine.timer_size("ns"), await api.size(), await api.dead_size()) == (0, 0, 0)
    # Only the queue's own keys may stay (registry, counts, a wake token): no job, element or timer key.
    assert await namespace_keys(runtime) <= {keys.queues("ns"), keys.meta("ns", "q"), keys.wake("ns", "q")}
    assert (await api.consume()).status_code == 404


async def test_unknown_ids_and_other_queues_jobs_answer_204_and_touch_nothing(api: Api) -> None:
    elsewhere = await api.publish("other")
    kept = await api.publish()
    response = await batch_ack(api, f"{jobdata.new_job_id(0)},{jobdata.new_job_id(5)}", elsewhere)
    assert response.status_code == 204
    assert await exists(api, elsewhere, "other") and await exists(api, kept)


async def test_comma_and_repeated_forms_and_duplicates(api: Api) -> None:
    first, second, third, kept = [await api.publish() for _ in range(4)]
    assert (await batch_ack(api, f"{first},{second}", third)).status_code == 204
    assert [await exists(api, job_id) for job_id in (first, second, third, kept)] == [False, False, False, True]
    # The same id several times, both ways, and a trailing comma: ACKed once, no error.
    assert (await batch_ack(api, f"{kept},{kept},", kept)).status_code == 204
    assert not await exists(api, kept)


async def test_exactly_the_maximum_is_accepted(api: Api) -> None:
    job_ids = await publish_many(api, MAX_CONSUME_COUNT)
    assert (await batch_ack(api, *job_ids)).status_code == 204
    assert await api.size() == 0


# -- what it refuses, before anything is ACKed ------------------------------------------------


async def test_a_malformed_id_refuses_the_whole_batch(api: Api) -> None:
    first, second = await api.publish(), await api.publish()
    await api.consume_job(ttr=60)  # first: reserved; second: ready
    # Any 1..128 of [-_.:A-Za-z0-9] may name a job (a business chooses ids); outside that, refused.
    for bad in ("x!", "a" * 129, "ü", "a/b", f" {second}"):
        response = await batch_ack(api, f"{first},{bad}", second)
        assert (response.status_code, response.json()) == (400, {"error": "invalid job id"}), bad
    assert await exists(api, first) and await exists(api, second)
    assert await api.size() == 1


@pytest.mark.parametrize("values", [(), ("",), (",,",), ("", ",")])
async def test_no_id_is_refused(api: Api, values: tuple[str, ...]) -> None:
    response = await batch_ack(api, *values)
    assert (response.status_code, response.json()) == (400, {"error": "no job_id given"})


async def test_more_than_the_maximum_is_refused(api: Api) -> None:
    job_ids = await publish_many(api, MAX_CONSUME_COUNT)
    one_more = jobdata.new_job_id(0)
    for values in ((*job_ids, one_more), (",".join([*job_ids, one_more]),)):
        response = await batch_ack(api, *values)
        assert (response.status_code, response.json()) == (400, {"error": f"more than {MAX_CONSUME_COUNT} job ids"})
    assert await api.size() == MAX_CONSUME_COUNT


async def test_names_pool_and_token_are_checked_first(api: Api, make_token: MakeToken) -> None:
    job_id = await api.publish()
    other_ns_token = await make_token("other")
    cases = [
        ({}, 401, "token not found"),
        ({"X-Token": "wrong"}, 401, "invalid token"),
        ({"X-Token": other_ns_token}, 401, "invalid token"),
        ({"X-Token": f"nope:{other_ns_token}"}, 404, "pool not found"),
    ]
    for headers, status, error in cases:
        for query in ({"job_id": job_id}, {"job_id": "x"}, {}):  # before the ids are looked at
            response = await api.client.delete(BATCH, params=query, headers=headers)
            assert (response.status_code, response.json()) == (status, {"error": error}), (headers, query)
    response = await api.client.delete("/api/ns/q.x/jobs", params={"job_id": job_id}, headers={"X-Token": "nope:x"})
    assert (response.status_code, response.json()) == (400, {"error": "queue name contains forbidden characters"})
    assert await exists(api, job_id)
    # The token also works as a query parameter, as on every route.
    response = await api.client.delete(BATCH, params={"job_id": job_id, "token": api.headers["X-Token"]})
    assert response.status_code == 204 and not await exists(api, job_id)


async def test_only_delete_is_routed(api: Api) -> None:
    job_id = await api.publish()
    for method in ("GET", "PUT", "POST"):
        response = await api.client.request(method, BATCH, params={"job_id": job_id}, headers=api.headers)
        assert (response.status_code, response.json()) == (404, {"error": "api not found"}), method
    assert await exists(api, job_id)


# -- routing and metrics ----------------------------------------------------------------------


async def test_a_queue_named_jobs_still_works(api: Api) -> None:
    job_id = await api.publish("jobs")
    assert (await api.consume_job("jobs", ttr=60))["job_id"] == job_id
    assert (await batch_ack(api, job_id, path="/api/ns/jobs/jobs")).status_code == 204
    assert not await exists(api, job_id, "jobs")
    assert (await api.client.get("/api/ns/jobs/size")).json()["size"] == 0


async def test_each_id_counts_as_one_ack(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, make_token: MakeToken
) -> None:
    ns = "b" + uuid.uuid4().hex[:12]  # counters live as long as the test process: a namespace of its own
    headers = auth(await make_token(ns))
    response = await data.put(f"/api/{ns}/q/bulk", content=b"[1,2]", headers=headers)
    published = response.json()["job_ids"]
    unknown = jobdata.new_job_id(0)
    query = [("job_id", ",".join([*published, unknown])), ("job_id", published[0])]  # a repeat counts once
    assert (await data.delete(f"/api/{ns}/q/jobs", params=query, headers=headers)).status_code == 204
    assert (await data.delete(f"/api/{ns}/q/job/{unknown}", headers=headers)).status_code == 204
    scrape = Scrape((await admin.get("/metrics")).text)
    acks = scrape.value("infra_lmstfy_redis_job_ack_elapsed_ms_count", pool="default", namespace=ns, queue="q")
    assert acks == 4  # three ids in the batch, as three single ACKs would count, plus the single one


async def test_a_migrating_pool_acks_the_batch_in_both_pools(redis_url: str) -> None:
    old = pools.engine("default", PoolConfig("default", url=f"{redis_url}/0"))
    new = pools.engine("new", PoolConfig("new", url=f"{redis_url}/1"))
    try:
        migrating = MigrationEngine(old, new)
        legacy = (await old.publish("ns", "q", NewJob(b"old"))).job_id
        fresh = (await migrating.publish("ns", "q", NewJob(b"new"))).job_id
        assert await migrating.ack_many("ns", "q", [legacy, fresh, jobdata.new_job_id(0)]) == 2
        assert (await old.size("ns", "q"), await new.size("ns", "q")) == (0, 0)
        assert await migrating.ack_many("ns", "q", [legacy, fresh]) == 0
    finally:
        await old.close()
        await new.close()
