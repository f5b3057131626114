"""GET /api/{ns}/{q}?ack=QUEUE:ID,...: a consume that first ACKs jobs (beyond lmstfy).

Runs on standalone Redis and on both Redis Clusters (the `runtime` fixture). The lean
dispatcher answers these as the app does: tests/web/test_hot.py.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from lmstfy_py.admin.limits import Limit
from lmstfy_py.runtime import Runtime
from lmstfy_py.web.ack_params import ACK_FORM
from lmstfy_py.web.params import MAX_CONSUME_COUNT
from tests.metrics.test_metrics import Scrape
from tests.web.conftest import Api, MakeToken, auth
from tests.web.test_batch_ack import exists, publish_many


async def consume(api: Api, queues: str = "q", *ack_values: str, **query: int) -> httpx.Response:
    """One consume with an `ack` parameter per value (each may hold several entries, comma-separated)."""
    params = [("ack", value) for value in ack_values] + [(key, str(value)) for key, value in query.items()]
    return await api.client.get(f"/api/ns/{queues}", params=params, headers=api.headers)


async def reserved(api: Api, queue: str = "q") -> str:
    job_id = await api.publish(queue)
    assert (await api.consume_job(queue, ttr=60))["job_id"] == job_id
    return job_id


async def test_the_named_jobs_of_two_queues_are_acked_and_the_next_job_consumed(api: Api) -> None:
    first, second, elsewhere = await reserved(api), await reserved(api), await reserved(api, "other")
    kept = await reserved(api)
    waiting = await api.publish()
    response = await consume(api, "q", f"q:{first},other:{elsewhere}", f"q:{second}", ttr=60)
    assert response.status_code == 200 and response.json()["job_id"] == waiting
    for queue, job_id in (("q", first), ("q", second), ("other", elsewhere)):
        assert not await exists(api, job_id, queue), job_id
    assert await exists(api, kept)
    # Never delivered again, even once their ttr has passed: they are gone.
    assert (await consume(api, "q,other", timeout=0)).status_code == 404


async def test_the_acks_stay_done_when_no_job_comes(api: Api) -> None:
    job_id = await reserved(api)
    response = await consume(api, "q", f"q:{job_id}", timeout=1)  # a long-poll that finds nothing
    assert (response.status_code, response.json()) == (404, {"msg": "no job available"})
    assert not await exists(api, job_id)
    assert (await consume(api, "empty", f"q:{job_id}")).status_code == 404  # an ACK of a gone job: no error


async def test_business_ids_with_colons_and_repeats(api: Api) -> None:
    response = await api.client.put("/api/ns/q", params={"job_id": "order:42:a"}, content=b"x", headers=api.headers)
    assert response.status_code == 201
    assert (await api.consume_job(ttr=60))["job_id"] == "order:42:a"
    assert (await consume(api, "q", "q:order:42:a,q:order:42:a", "q:order:42:a")).status_code == 404
    assert not await exists(api, "order:42:a")


async def test_exactly_the_maximum_is_accepted(api: Api) -> None:
    job_ids = await publish_many(api, MAX_CONSUME_COUNT)
    assert (await consume(api, "q", ",".join(f"q:{job_id}" for job_id in job_ids))).status_code == 404
    assert await api.size() == 0


BAD = {
    "empty value": ("",),
    "empty entry": ("q:{id},",),
    "empty entry alone": ("q:{id}", ""),
    "no colon": ("{id}",),
    "no queue": (":{id}",),
    "no id": ("q:",),
    "bad queue": ("q.x:{id}",),
    "hidden queue": ("_q:{id}",),
    "long queue": ("n" * 256 + ":{id}",),
    "bad id": ("q:{id},q:b@d",),
    "long id": ("q:" + "i" * 129,),
}
ERRORS = {
    "bad queue": "invalid ack: queue name contains forbidden characters or is too long",
    "hidden queue": "invalid ack: queue name contains forbidden characters or is too long",
    "long queue": "invalid ack: queue name contains forbidden characters or is too long",
    "bad id": "invalid ack: invalid job id",
    "long id": "invalid ack: invalid job id",
}


@pytest.mark.parametrize("name", BAD)
async def test_a_malformed_ack_refuses_the_request_and_nothing_happens(api: Api, name: str) -> None:
    job_id = await reserved(api)
    ready = await api.publish()
    values = [value.replace("{id}", job_id) for value in BAD[name]]
    response = await consume(api, "q", *values, ttr=60)
    assert (response.status_code, response.json()) == (400, {"error": ERRORS.get(name, ACK_FORM)})
    assert await exists(api, job_id)  # not ACKed
    assert await api.size() == 1 and (await api.consume_job())["job_id"] == ready  # not reserved


async def test_more_than_the_maximum_is_refused(api: Api) -> None:
    job_ids = await publish_many(api, MAX_CONSUME_COUNT + 1)
    entries = [f"q:{job_id}" for job_id in job_ids]
    for values in ((",".join(entries),), (",".join(entries[:50]), ",".join(entries[50:]))):
        response = await consume(api, "q", *values)
        assert (response.status_code, response.json()) == (400, {"error": "more than 100 job ids in ack"})
    assert await api.size() == MAX_CONSUME_COUNT + 1


async def test_the_consumes_own_checks_come_first(api: Api) -> None:
    job_id = await reserved(api)
    response = await consume(api, "q", "nocolon", count=0)
    assert (response.status_code, response.json()) == (400, {"error": "invalid count"})
    response = await api.client.get("/api/ns/q", params={"ack": f"q:{job_id}"}, headers={"X-Token": "wrong"})
    assert response.status_code == 401
    assert await exists(api, job_id)


async def test_a_throttled_consume_acks_nothing(api: Api, runtime: Runtime) -> None:
    job_id = await reserved(api)  # the consume of the limit's one unit comes after
    await runtime.limits.set("default", "ns", api.headers["X-Token"], Limit(read=1, write=100, interval=60))
    await api.publish()
    assert (await api.consume_job(ttr=60))["job_id"]
    response = await consume(api, "q", f"q:{job_id}")
    assert response.status_code == 429
    assert await exists(api, job_id)


async def test_each_id_counts_as_one_ack(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, make_token: MakeToken
) -> None:
    ns = "c" + uuid.uuid4().hex[:12]  # counters live as long as the test process: a namespace of its own
    headers = auth(await make_token(ns))
    published = (await data.put(f"/api/{ns}/q/bulk", content=b"[1,2]", headers=headers)).json()["job_ids"]
    await data.get(f"/api/{ns}/q", params={"count": 2, "ttr": 60}, headers=headers)
    query = {"ack": ",".join(f"q:{job_id}" for job_id in published)}
    assert (await data.get(f"/api/{ns}/q", params=query, headers=headers)).status_code == 404
    scrape = Scrape((await admin.get("/metrics")).text)
    acks = scrape.value("infra_lmstfy_redis_job_ack_elapsed_ms_count", pool="default", namespace=ns, queue="q")
    assert acks == 2
