"""SPEC 13 over HTTP (stage A): a queue's settings and their admin twin, `keep` on publish, complete with
a result, the records of ended jobs, and result?wait; on every backend of the `runtime` fixture."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from typing import Any

import httpx

from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from tests.web.conftest import Api, MakeToken, auth, wait_for

MAX_KEEP = 2592000
BIG = b"x" * ((1 << 20) + 1)
FLOW = {"max_reserved": 0, "rate": 0, "burst": None, "group_concurrency": 1}  # SPEC 14's settings, unset


def refusal(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


async def settings(api: Api, queue: str = "q") -> dict[str, Any]:
    response = await api.client.get(f"/api/ns/{queue}/settings", headers=api.headers)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def put_settings(api: Api, queue: str = "q", **query: Any) -> httpx.Response:
    return await api.client.put(f"/api/ns/{queue}/settings", params=query, headers=api.headers)


async def complete(api: Api, job_id: str, body: bytes = b"", queue: str = "q") -> httpx.Response:
    return await api.client.put(f"/api/ns/{queue}/job/{job_id}/complete", content=body, headers=api.headers)


async def result(api: Api, job_id: str, **query: Any) -> httpx.Response:
    return await api.client.get(f"/api/ns/q/job/{job_id}/result", params=query, headers=api.headers)


async def reserved(api: Api, **query: Any) -> str:
    job_id = await api.publish(**query)
    assert (await api.consume_job())["job_id"] == job_id
    return job_id


# -- settings -----------------------------------------------------------------------------------


async def test_settings_default_to_lmstfys_and_need_no_job(api: Api) -> None:
    assert await settings(api, "never-used") == {
        "namespace": "ns",
        "queue": "never-used",
        "keep": 0,
        "events": 0,
        **FLOW,
    }


async def test_put_settings_sets_those_given_and_answers_them_all(api: Api) -> None:
    response = await put_settings(api, keep=60)
    assert (response.status_code, response.json()) == (
        200,
        {"namespace": "ns", "queue": "q", "keep": 60, "events": 0, **FLOW},
    )
    response = await put_settings(api, events=1000)
    assert response.json() == {"namespace": "ns", "queue": "q", "keep": 60, "events": 1000, **FLOW}
    response = await put_settings(api, keep=MAX_KEEP, events=0)
    assert response.json() == {"namespace": "ns", "queue": "q", "keep": MAX_KEEP, "events": 0, **FLOW}
    assert await settings(api) == response.json()
    assert (await api.client.delete("/api/ns/q", headers=api.headers)).status_code == 204
    assert (await settings(api))["keep"] == MAX_KEEP  # destroy keeps them


async def test_a_refused_settings_put_names_its_fault_and_changes_nothing(api: Api) -> None:
    await put_settings(api, keep=5, events=7)
    cases = [
        ({"keep": MAX_KEEP + 1}, "invalid keep"),
        ({"keep": "-1"}, "invalid keep"),
        ({"keep": ""}, "invalid keep"),
        ({"keep": 10, "events": 1_000_001}, "invalid events"),
        ({"keep": 10, "events": "x"}, "invalid events"),
        ({"keep": 10, "pause": 1}, "unknown setting: pause"),
        ({"pool": "default"}, "unknown setting: pool"),
        ({}, "no setting given"),
    ]
    for query, error in cases:
        assert refusal(await put_settings(api, **query)) == (400, {"error": error}), query
    assert await settings(api) == {"namespace": "ns", "queue": "q", "keep": 5, "events": 7, **FLOW}


async def test_settings_take_the_namespaces_token(data: httpx.AsyncClient, api: Api, make_token: MakeToken) -> None:
    other = await make_token("other")
    for method in ("GET", "PUT"):
        response = await data.request(method, "/api/ns/q/settings", params={"keep": 1})
        assert refusal(response) == (401, {"error": "token not found"})
        response = await data.request(method, "/api/ns/q/settings", params={"keep": 1}, headers=auth(other))
        assert refusal(response) == (401, {"error": "invalid token"})
    # The token may come in the query, as on every route: it is no setting.
    response = await data.put("/api/ns/q/settings", params={"keep": 3, "token": api.headers["X-Token"]})
    assert response.json()["keep"] == 3
    assert refusal(await data.get("/api/ns/bad.q/settings", headers=api.headers)) == (
        400,
        {"error": "queue name contains forbidden characters"},
    )


async def test_the_admin_twin_shows_and_sets_the_same_settings(admin: httpx.AsyncClient, api: Api) -> None:
    response = await admin.put("/queues/ns/q/settings", params={"keep": 30, "pool": "default"})
    assert (response.status_code, response.json()) == (
        200,
        {"namespace": "ns", "queue": "q", "keep": 30, "events": 0, **FLOW},
    )
    assert (await admin.get("/queues/ns/q/settings")).json() == await settings(api)
    assert refusal(await admin.put("/queues/ns/q/settings", params={"token": "t"})) == (
        400,
        {"error": "unknown setting: token"},
    )
    assert refusal(await admin.put("/queues/ns/q/settings", params={"events": -1})) == (
        400,
        {"error": "invalid events"},
    )
    assert refusal(await admin.get("/queues/ns/q/settings", params={"pool": "nope"})) == (
        400,
        {"error": "pool not found"},
    )
    assert (await settings(api))["keep"] == 30


# -- keep on publish ----------------------------------------------------------------------------


async def test_a_bad_keep_refuses_every_publish_and_stores_nothing(api: Api) -> None:
    job_id = await reserved(api)
    for keep in (str(MAX_KEEP + 1), "1h", "-1"):
        for response in await api.publish_every_way(job_id, keep=keep):
            assert refusal(response) == (400, {"error": "invalid keep"}), keep
    assert await api.size() == 0
    assert (await api.get(f"/job/{job_id}")).json()["state"] == "reserved"  # the republish ACKed nothing


async def test_a_live_job_shows_no_result_and_no_end(api: Api) -> None:
    job_id = await api.publish(keep=60)
    for shown in ((await result(api, job_id)).json(), (await api.get(f"/job/{job_id}")).json()):
        assert (shown["state"], shown["result"], shown["finished_ms"], shown["attempts"]) == ("ready", None, None, 0)


# -- complete and the record it leaves -----------------------------------------------------------


async def test_complete_keeps_the_result_in_the_jobs_record(api: Api) -> None:
    job_id = await reserved(api, keep=60, body=b"the data")
    before = time.time_ns() // 1_000_000
    response = await complete(api, job_id, b"\x00result\xff")
    assert (response.status_code, response.json()) == (200, {"msg": "completed"})
    shown = (await api.get(f"/job/{job_id}")).json()
    assert (shown["job_id"], shown["state"], shown["attempts"]) == (job_id, "completed", 1)
    assert base64.b64decode(shown["result"]) == b"\x00result\xff"
    assert base64.b64decode(shown["data"]) == b"the data"
    assert before - 1000 <= shown["finished_ms"] <= time.time_ns() // 1_000_000 + 1000
    assert 58 <= shown["ttl"] <= 60
    assert (await api.consume()).status_code == 404  # never delivered again
    assert refusal(await complete(api, job_id)) == (409, {"error": "job is not reserved"})


async def test_an_empty_result_is_a_result(api: Api) -> None:
    job_id = await reserved(api, keep=60)
    assert (await complete(api, job_id)).status_code == 200
    assert (await api.get(f"/job/{job_id}")).json()["result"] == ""


async def test_a_refused_complete_changes_nothing(api: Api) -> None:
    ready = await api.publish("ready", keep=60)
    assert refusal(await complete(api, ready, queue="ready")) == (409, {"error": "job is not reserved"})
    assert await api.size("ready") == 1
    assert refusal(await complete(api, "nosuchjob")) == (404, {"error": "job not found"})
    assert refusal(await complete(api, "b@d")) == (400, {"error": "invalid job id"})
    job_id = await reserved(api, keep=60)
    assert refusal(await complete(api, job_id, BIG)) == (413, {"error": "body too large"})
    assert (await api.get(f"/job/{job_id}")).json()["state"] == "reserved"
    response = await api.client.put(f"/api/ns/q/job/{job_id}/complete", content=b"r")
    assert refusal(response) == (401, {"error": "token not found"})
    assert (await api.get(f"/job/{job_id}")).json()["state"] == "reserved"


async def test_the_queues_keep_applies_when_publish_gives_none(api: Api) -> None:
    await put_settings(api, keep=60)
    job_id = await reserved(api)
    assert (await complete(api, job_id, b"r")).status_code == 200
    assert (await api.get(f"/job/{job_id}")).json()["state"] == "completed"
    gone = await reserved(api, keep=0)  # keep=0 on publish: lmstfy's, gone at once
    assert (await complete(api, gone, b"r")).status_code == 200
    assert (await api.get(f"/job/{gone}")).status_code == 404


async def test_the_admin_look_up_shows_a_record(admin: httpx.AsyncClient, api: Api) -> None:
    job_id = await reserved(api, keep=60)
    await complete(api, job_id, b"done")
    shown = (await admin.get(f"/queues/ns/q/job/{job_id}", params={"pool": "default"})).json()
    tenants = (await api.get(f"/job/{job_id}")).json()
    assert shown.pop("elapsed_ms") <= tenants.pop("elapsed_ms")  # read a moment later
    assert shown == tenants
    assert (shown["state"], base64.b64decode(shown["result"])) == ("completed", b"done")
    assert refusal(await admin.get("/queues/ns/q/job/nosuchjob")) == (404, {"error": "job not found"})


# -- result -------------------------------------------------------------------------------------


async def test_result_of_a_live_job_is_202_and_of_an_ended_one_200(api: Api) -> None:
    job_id = await reserved(api, keep=60)
    response = await result(api, job_id)
    assert (response.status_code, response.json()["state"], response.json()["result"]) == (202, "reserved", None)
    await complete(api, job_id, b"42")
    response = await result(api, job_id, wait=5)
    assert (response.status_code, response.json()["state"]) == (200, "completed")
    assert base64.b64decode(response.json()["result"]) == b"42"
    assert refusal(await result(api, "nosuchjob")) == (404, {"error": "job not found"})


async def test_a_waiting_result_answers_at_the_end_even_with_keep_0(api: Api, runtime: Runtime) -> None:
    job_id = await reserved(api, keep=0)
    waiter = asyncio.create_task(result(api, job_id, wait=10))
    # In place once counted among the job's waiters (a fixed sleep let a loaded machine end the job
    # first, and with keep 0 a late waiter finds nothing: SPEC 13 promises the end to those present).
    redis, waiters = runtime.pools.get("default").redis, keys.waiters("ns", "q", job_id)
    await wait_for(lambda: _counted(redis, waiters), timeout=10)
    assert not waiter.done()
    started = time.monotonic()
    await complete(api, job_id, b"late")
    response = await waiter
    assert time.monotonic() - started < 5.0  # at the end, not at the wait's 10 s
    assert (response.status_code, response.json()["state"]) == (200, "completed")
    assert base64.b64decode(response.json()["result"]) == b"late"


async def _counted(redis: Any, waiters: str) -> bool:
    return int(await redis.get(waiters) or 0) >= 1


async def test_a_result_wait_ends_with_202_when_nothing_ended(api: Api) -> None:
    job_id = await api.publish()
    started = time.monotonic()
    response = await result(api, job_id, wait=1)
    assert 0.9 <= time.monotonic() - started < 3.0
    assert (response.status_code, response.json()["state"]) == (202, "ready")


async def test_result_refuses_a_bad_wait_and_another_namespaces_token(api: Api, make_token: MakeToken) -> None:
    job_id = await api.publish()
    for wait in ("601", "x", "-1", "1.5"):
        assert refusal(await result(api, job_id, wait=wait)) == (400, {"error": "invalid wait"}), wait
    other = await make_token("other")
    response = await api.client.get(f"/api/ns/q/job/{job_id}/result", headers=auth(other))
    assert refusal(response) == (401, {"error": "invalid token"})


# -- the dashboard's job look-up ----------------------------------------------------------------


async def test_the_dashboards_look_up_shows_a_record_and_its_result(admin: httpx.AsyncClient, api: Api) -> None:
    job_id = await reserved(api, keep=60)
    await complete(api, job_id, b"<i>done</i>")
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": job_id})).text
    assert "data-job-state>completed<" in page
    assert re.search(r"data-job-finished>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
    assert "&lt;i&gt;done&lt;/i&gt;" in page and "<i>done</i>" not in page  # escaped, not markup
    binary = await reserved(api, keep=60)
    await complete(api, binary, b"\x00\xff")
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": binary})).text
    assert re.search(r"data-job-result>.*00 ff.*AP8=", page, re.S)  # hex and base64, as data is shown


async def test_every_end_is_a_result_and_leaves_its_record(api: Api) -> None:
    expiring = await api.publish("e", ttl=1, keep=60)
    dead = await api.kill_one()  # keep 0 and dead: a dead job is not ended for good, but result says so
    response = await result(api, dead)
    assert (response.status_code, response.json()["state"]) == (200, "dead")
    assert (await api.client.put("/api/ns/q/settings", params={"keep": 60}, headers=api.headers)).status_code == 200
    deleted = await api.kill_one()
    assert (await api.client.delete(f"/api/ns/q/deadletter/job/{deleted}", headers=api.headers)).status_code == 204
    dropped = await api.publish()
    assert (await api.client.delete("/api/ns/q", headers=api.headers)).status_code == 204
    for job_id in (deleted, dropped):
        response = await result(api, job_id)
        assert (response.status_code, response.json()["state"], response.json()["result"]) == (200, "deleted", None)
    response = await api.client.get(f"/api/ns/e/job/{expiring}/result", params={"wait": 5}, headers=api.headers)
    assert (response.status_code, response.json()["state"]) == (200, "expired")


async def test_keep_on_bulk_and_republish_applies_to_their_jobs(api: Api) -> None:
    bulk = await api.client.put("/api/ns/b/bulk", params={"keep": 60}, content=b'["one","two"]', headers=api.headers)
    ids = bulk.json()["job_ids"]
    for job_id in ids:
        assert (await api.consume_job("b"))["job_id"] in ids
        assert (await api.client.delete(f"/api/ns/b/job/{job_id}", headers=api.headers)).status_code == 204
        assert (await api.client.get(f"/api/ns/b/job/{job_id}", headers=api.headers)).json()["state"] == "completed"
    old = await reserved(api, keep=60)
    response = await api.client.put(f"/api/ns/q/job/{old}", params={"keep": 60}, content=b"new", headers=api.headers)
    new = response.json()["job_id"]
    assert (await api.get(f"/job/{old}")).json()["state"] == "completed"  # republish ended it
    assert (await api.consume_job())["job_id"] == new
    assert (await complete(api, new, b"r")).status_code == 200
    assert (await api.get(f"/job/{new}")).json()["state"] == "completed"
