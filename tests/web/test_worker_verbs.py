"""Beyond lmstfy (SPEC section 7) over HTTP, with the real timer pump, on a standalone Redis and on
Redis Clusters: release (with delay or backoff), touch, bury, priority, business ids, pause, job
state, queue stats, the dead letter job by job, and bad input refused with nothing changed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from lmstfy_py.types import NewJob
from tests.web.conftest import Api, MakeToken, wait_for


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def put(api: Api, path: str, **query: Any) -> httpx.Response:
    return await api.client.put(f"/api/ns/q{path}", params=query, headers=api.headers)


async def publish(api: Api, queue: str = "q", body: bytes = b"x", **query: Any) -> httpx.Response:
    return await api.client.put(f"/api/ns/{queue}", content=body, params=query, headers=api.headers)


async def state(api: Api, job_id: str) -> dict[str, Any]:
    response = await api.get(f"/job/{job_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def reserve(api: Api, **query: Any) -> str:
    job_id: str = (await api.consume_job(**query))["job_id"]
    return job_id


async def stats(api: Api, queue: str = "q") -> dict[str, Any]:
    found: dict[str, Any] = (await api.client.get(f"/api/ns/{queue}/stats", headers=api.headers)).json()
    return found


# -- release -----------------------------------------------------------------------------------


async def test_release_without_delay_makes_the_job_ready_at_once(api: Api) -> None:
    job_id = await api.publish(tries=3)
    assert await reserve(api) == job_id
    answer = await put(api, f"/job/{job_id}/release", reason="db down")
    body = answer.json()
    assert answer.status_code == 200 and body["msg"] == "released" and body["remain_tries"] == 2
    assert abs(body["due_ms"] - now_ms()) < 1000
    job = await state(api, job_id)
    assert (job["state"], job["attempts"], job["last_error"], job["due_ms"]) == ("ready", 1, "db down", None)
    assert await reserve(api) == job_id  # delivered again, its second attempt
    assert (await state(api, job_id))["attempts"] == 2


async def test_release_with_a_delay_is_never_delivered_before_it(api: Api) -> None:
    job_id = await api.publish(tries=2)
    await reserve(api)
    released = (await put(api, f"/job/{job_id}/release", delay_ms=400)).json()
    due = released["due_ms"]
    job = await state(api, job_id)
    assert (job["state"], job["due_ms"]) == ("delayed", due)
    assert (await api.consume()).status_code == 404
    assert await reserve(api, timeout=3) == job_id
    assert now_ms() >= due  # never early (the pump moves it within milliseconds of due)
    assert (await state(api, job_id))["remain_tries"] == 0


async def test_exponential_backoff_doubles_the_delay_after_each_attempt(api: Api) -> None:
    job_id = await api.publish(tries=5, backoff="exponential", backoff_ms=100, backoff_max_ms=500)
    for attempt, expected_ms in enumerate((100, 200, 400, 500), start=1):
        assert await reserve(api, timeout=3) == job_id
        assert (await state(api, job_id))["attempts"] == attempt
        before = now_ms()
        released = (await put(api, f"/job/{job_id}/release")).json()
        assert before + expected_ms <= released["due_ms"] <= now_ms() + expected_ms
        assert released["remain_tries"] == 5 - attempt
    assert await reserve(api, timeout=3) == job_id  # the fifth delivery, after 500 ms (the cap)
    assert now_ms() >= released["due_ms"]


async def test_a_reservation_that_times_out_gets_the_jobs_backoff_too(api: Api) -> None:
    job_id = await api.publish(tries=3, backoff="exponential", backoff_ms=1000)
    await reserve(api, ttr_ms=50)

    async def delayed() -> bool:
        return (await state(api, job_id))["state"] == "delayed"

    await wait_for(delayed)
    job = await state(api, job_id)
    assert job["due_ms"] - now_ms() > 500  # about 1 s after the ttr passed, not ready at once
    assert (await api.consume()).status_code == 404


async def test_release_with_no_try_left_buries_the_job_with_its_reason(api: Api) -> None:
    job_id = await api.publish()  # one try
    await reserve(api)
    answer = await put(api, f"/job/{job_id}/release", reason="giving up")
    assert (answer.status_code, answer.json()) == (200, {"msg": "buried"})
    job = await state(api, job_id)
    assert (job["state"], job["last_error"]) == ("dead", "giving up")
    page = (await api.get("/deadletter/jobs")).json()
    assert [(j["job_id"], j["last_error"], j["attempts"]) for j in page["jobs"]] == [(job_id, "giving up", 1)]


async def test_an_untried_release_gives_back_the_try_and_the_attempt(api: Api) -> None:
    job_id = await api.publish(backoff="exponential", backoff_ms=60_000)  # one try, a long backoff
    await reserve(api)
    answer = await put(api, f"/job/{job_id}/release", untried=1)
    body = answer.json()
    # Not buried although the reservation took the last try, and ready at once despite the backoff.
    assert (answer.status_code, body["msg"], body["remain_tries"]) == (200, "released", 1)
    job = await state(api, job_id)
    assert (job["state"], job["attempts"], job["remain_tries"], job["last_error"]) == ("ready", 0, 1, None)
    assert await reserve(api) == job_id
    assert (await state(api, job_id))["attempts"] == 1


async def test_an_untried_release_keeps_a_given_delay_and_the_last_error(api: Api) -> None:
    job_id = await api.publish(tries=3)
    await reserve(api)
    await put(api, f"/job/{job_id}/release", reason="db down")  # a real failure: attempt 1 counts
    await reserve(api)
    released = (await put(api, f"/job/{job_id}/release", untried=1, delay_ms=300)).json()
    assert released["remain_tries"] == 2  # 3, less the failed attempt; the untried one given back
    job = await state(api, job_id)
    assert (job["state"], job["attempts"], job["last_error"]) == ("delayed", 1, "db down")
    assert await reserve(api, timeout=3) == job_id
    assert now_ms() >= released["due_ms"]


async def test_untried_must_be_0_or_1(api: Api) -> None:
    job_id = await api.publish(tries=2)
    await reserve(api)
    answer = await put(api, f"/job/{job_id}/release", untried="yes")
    assert (answer.status_code, answer.json()) == (400, {"error": "invalid untried"})
    assert (await state(api, job_id))["state"] == "reserved"


# -- touch and bury ----------------------------------------------------------------------------


async def test_touch_keeps_the_lease_past_the_old_deadline(api: Api) -> None:
    job_id = await api.publish(tries=2)
    await reserve(api, ttr_ms=300)
    touched = (await put(api, f"/job/{job_id}/touch", ttr_ms=2000)).json()
    assert touched["msg"] == "touched" and abs(touched["due_ms"] - (now_ms() + 2000)) < 500
    await asyncio.sleep(0.6)  # twice the old ttr: without the touch it would be ready again
    assert (await api.consume()).status_code == 404
    job = await state(api, job_id)
    assert (job["state"], job["due_ms"]) == ("reserved", touched["due_ms"])


async def test_bury_sends_a_reserved_job_to_the_dead_letter_now(api: Api) -> None:
    job_id = await api.publish(tries=5)
    await reserve(api)
    answer = await put(api, f"/job/{job_id}/bury", reason="poison message")
    assert (answer.status_code, answer.json()) == (200, {"msg": "buried"})
    job = await state(api, job_id)
    assert (job["state"], job["last_error"]) == ("dead", "poison message")
    assert await api.dead_size() == 1 and (await stats(api))["reserved"] == 0


@pytest.mark.parametrize("verb", ["release", "touch", "bury"])
async def test_a_verb_needs_a_reserved_job_of_its_own_namespace(api: Api, make_token: MakeToken, verb: str) -> None:
    ready = await api.publish()
    for job_id, expected in (
        (ready, (409, {"error": "job is not reserved"})),
        ("no-such-job", (404, {"error": "job not found"})),
    ):
        answer = await put(api, f"/job/{job_id}/{verb}")
        assert (answer.status_code, answer.json()) == expected
    other = await make_token("other")  # a token of another namespace, on this namespace's job
    answer = await api.client.put(f"/api/ns/q/job/{ready}/{verb}", headers={"X-Token": other})
    assert (answer.status_code, answer.json()) == (401, {"error": "invalid token"})
    assert (await state(api, ready))["state"] == "ready"  # nothing changed


# -- priority ----------------------------------------------------------------------------------


async def test_higher_priorities_first_and_fifo_among_equals(api: Api) -> None:
    order = [("a", 0), ("b", 5), ("c", 5), ("d", 10), ("e", 0), ("f", 255), ("g", 5)]
    for name, priority in order:
        assert (await publish(api, body=name.encode(), priority=priority)).status_code == 201
    assert (await stats(api))["ready"] == 7 and await api.size() == 7
    assert (await api.get("/peek")).json()["data"] == "Zg=="  # "f", the next to come
    consumed = [(await api.consume_job())["data"] for _ in order]
    assert consumed == ["Zg==", "ZA==", "Yg==", "Yw==", "Zw==", "YQ==", "ZQ=="]  # f d b c g a e


async def test_queue_order_wins_over_priority_in_a_multi_queue_consume(api: Api) -> None:
    await publish(api, "first", body=b"low")
    await publish(api, "second", body=b"high", priority=200)
    jobs = (await api.client.get("/api/ns/first,second", params={"count": 2}, headers=api.headers)).json()
    assert [job["queue"] for job in jobs] == ["first", "second"]


async def test_a_prioritized_job_keeps_its_priority_when_it_comes_back(api: Api) -> None:
    await publish(api, body=b"plain", tries=2)
    urgent = (await publish(api, body=b"urgent", priority=9, tries=2)).json()["job_id"]
    assert await reserve(api, ttr_ms=50) == urgent
    await asyncio.sleep(0.3)  # its ttr passed: ready again, still ahead of the plain job
    assert await reserve(api, timeout=2) == urgent
    assert (await state(api, urgent))["priority"] == 9


# -- business ids ------------------------------------------------------------------------------


async def test_a_business_id_is_taken_while_its_job_is_alive(api: Api) -> None:
    first = await publish(api, job_id="order:42.close")
    assert (first.status_code, first.json()) == (201, {"msg": "published", "job_id": "order:42.close"})
    again = await publish(api, body=b"again", job_id="order:42.close")
    assert (again.status_code, again.json()) == (200, {"msg": "duplicate", "job_id": "order:42.close"})
    await reserve(api)  # reserved: still alive
    assert (await publish(api, job_id="order:42.close")).status_code == 200
    assert (await api.client.delete("/api/ns/q/job/order:42.close", headers=api.headers)).status_code == 204
    # Ended without unique_for: the id is free at once.
    assert (await publish(api, job_id="order:42.close")).status_code == 201
    assert (await api.consume_job())["data"] == "eA=="


async def test_unique_for_keeps_the_id_taken_after_the_job_ended(api: Api) -> None:
    await publish(api, job_id="pay-7", unique_for=1)
    job_id = await reserve(api)
    assert (await api.client.delete(f"/api/ns/q/job/{job_id}", headers=api.headers)).status_code == 204
    assert (await publish(api, job_id="pay-7", unique_for=1)).json()["msg"] == "duplicate"
    await asyncio.sleep(1.2)
    assert (await publish(api, job_id="pay-7", unique_for=1)).status_code == 201


async def test_unique_for_also_holds_after_a_ttl_or_a_dead_letter_delete(api: Api) -> None:
    await publish(api, job_id="expiring", ttl=1, unique_for=1)
    await publish(api, job_id="deleted", unique_for=2)
    await reserve(api, ttr_ms=60_000)  # "expiring", the first published
    job_id = await reserve(api, ttr_ms=60_000)
    await put(api, f"/job/{job_id}/bury")
    assert (await api.client.delete("/api/ns/q/deadletter/job/deleted", headers=api.headers)).status_code == 204
    await asyncio.sleep(1.1)  # "expiring" has expired by its ttl
    assert (await api.get("/job/expiring")).status_code == 404
    for name in ("expiring", "deleted"):  # taken until its ttl + 1 s, and 2 s after its delete
        assert (await publish(api, job_id=name, unique_for=1)).json()["msg"] == "duplicate", name
    await asyncio.sleep(1.1)
    for name in ("expiring", "deleted"):
        assert (await publish(api, job_id=name)).status_code == 201, name


async def test_a_bulk_names_each_job_and_reports_its_duplicates(api: Api) -> None:
    await publish(api, job_id="b2")
    answer = await api.client.put(
        "/api/ns/q/bulk",
        content=b'["one", "two", "three", "four"]',
        params={"job_id": "b1,b2,b3,b1"},
        headers=api.headers,
    )
    assert (answer.status_code, answer.json()) == (
        201,
        {"msg": "published", "job_ids": ["b1", "b2", "b3", "b1"], "duplicates": ["b2", "b1"]},
    )
    again = await api.client.put("/api/ns/q/bulk", content=b'["x"]', params={"job_id": "b3"}, headers=api.headers)
    assert (again.status_code, again.json()) == (200, {"msg": "duplicate", "job_ids": ["b3"], "duplicates": ["b3"]})
    assert await api.size() == 3  # b2 (first), b1, b3


# -- pause -------------------------------------------------------------------------------------


async def test_a_paused_queue_takes_jobs_and_times_them_but_delivers_none(api: Api) -> None:
    assert (await put(api, "/pause")).json() == {"msg": "paused"}
    await api.publish()
    await publish(api, delay_ms=200)
    assert (await stats(api))["paused"] is True
    assert (await api.consume(timeout=1)).status_code == 404  # waited its second, woken by nothing

    async def both_ready() -> bool:
        return (await stats(api))["ready"] == 2  # the delayed job came due all the same

    await wait_for(both_ready)
    other = await publish(api, "other")
    taken = await api.consume_job("q,other")  # a multi-queue consume takes from the others
    assert taken["job_id"] == other.json()["job_id"]
    waiting = asyncio.create_task(api.consume(timeout=5))
    await asyncio.sleep(0.3)
    assert (await api.client.delete("/api/ns/q/pause", headers=api.headers)).json() == {"msg": "resumed"}
    answer = await asyncio.wait_for(waiting, 3)  # resuming wakes the long-poll at once
    assert answer.status_code == 200


async def test_a_long_poll_on_a_paused_queue_is_not_woken_by_a_publish(api: Api) -> None:
    await put(api, "/pause")
    waiting = asyncio.create_task(api.consume(timeout=2))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    await api.publish()
    answer = await waiting
    assert answer.status_code == 404 and time.monotonic() - started > 1.2
    assert await api.size() == 1


# -- job state and stats -----------------------------------------------------------------------


async def test_a_jobs_state_through_its_life(api: Api) -> None:
    job_id = (await publish(api, delay_ms=300, tries=2, priority=3)).json()["job_id"]
    delayed = await state(api, job_id)
    assert (delayed["state"], delayed["attempts"], delayed["priority"]) == ("delayed", 0, 3)
    assert delayed["due_ms"] > now_ms()
    assert (await stats(api))["delayed"] == 1
    assert await reserve(api, timeout=3, ttr_ms=60_000) == job_id
    reserved = await state(api, job_id)
    assert (reserved["state"], reserved["attempts"]) == ("reserved", 1)
    assert abs(reserved["due_ms"] - (now_ms() + 60_000)) < 1000
    assert (await stats(api))["reserved"] == 1
    await put(api, f"/job/{job_id}/release")
    assert (await state(api, job_id))["state"] == "ready"
    await reserve(api)
    await put(api, f"/job/{job_id}/bury", reason="broken")
    dead = await state(api, job_id)
    assert (dead["state"], dead["due_ms"], dead["last_error"], dead["attempts"]) == ("dead", None, "broken", 2)
    assert await stats(api) == {
        "namespace": "ns",
        "queue": "q",
        "ready": 0,
        "delayed": 0,
        "reserved": 0,
        "dead": 1,
        "paused": False,
        "oldest_ready_ms": None,
        "due": {"1m": 0, "1h": 0, "1d": 0, "later": 0},
    }
    await api.client.delete("/api/ns/q/deadletter/job/" + job_id, headers=api.headers)
    assert (await api.get(f"/job/{job_id}")).status_code == 404


# -- the dead letter, job by job -------------------------------------------------------------


async def test_dead_letter_pages_respawn_and_delete_by_id(api: Api) -> None:
    names = [f"d{i}" for i in range(5)]
    for name in names:
        await publish(api, body=name.encode(), job_id=name)
        await reserve(api)
        await put(api, f"/job/{name}/bury", reason=f"broke {name}")
    first = (await api.get("/deadletter/jobs", limit=2)).json()
    assert [job["job_id"] for job in first["jobs"]] == ["d0", "d1"] and first["next"] == "d1"
    assert first["jobs"][0]["data"] == "ZDA=" and first["jobs"][0]["last_error"] == "broke d0"
    assert first["jobs"][0]["died_ms"] <= now_ms()
    second = (
        await api.client.get("/api/ns/q/deadletter/jobs", params={"after": "d1", "limit": 10}, headers=api.headers)
    ).json()
    assert [job["job_id"] for job in second["jobs"]] == ["d2", "d3", "d4"] and second["next"] is None
    respawned = await api.client.put("/api/ns/q/deadletter/job/d3", params={"tries": 4, "ttl": 0}, headers=api.headers)
    assert (respawned.status_code, respawned.json()) == (200, {"msg": "respawned", "count": 1})
    job = await state(api, "d3")
    assert (job["state"], job["remain_tries"], job["ttl"]) == ("ready", 4, 0)
    assert (await api.client.delete("/api/ns/q/deadletter/job/d1", headers=api.headers)).status_code == 204
    left = (await api.get("/deadletter/jobs")).json()
    assert [job["job_id"] for job in left["jobs"]] == ["d0", "d2", "d4"]
    for missing in ("d1", "d3"):  # deleted; alive again
        for method in ("PUT", "DELETE"):
            answer = await api.client.request(method, f"/api/ns/q/deadletter/job/{missing}", headers=api.headers)
            assert (answer.status_code, answer.json()) == (404, {"error": "job not found in the dead letter"})
    unknown = await api.client.get("/api/ns/q/deadletter/jobs", params={"after": "d1"}, headers=api.headers)
    assert unknown.status_code == 404


async def test_a_dead_job_respawned_with_a_delay_waits_for_it(api: Api) -> None:
    await publish(api, job_id="late")
    await reserve(api)
    await put(api, "/job/late/bury")
    await api.client.put("/api/ns/q/deadletter/job/late", params={"delay": 1}, headers=api.headers)
    assert (await state(api, "late"))["state"] == "delayed"
    assert (await api.consume()).status_code == 404
    assert await reserve(api, timeout=3) == "late"


async def test_the_admin_port_pauses_and_rescues_by_id_without_a_token(api: Api, admin: httpx.AsyncClient) -> None:
    await publish(api, job_id="stuck")
    await reserve(api)
    await put(api, "/job/stuck/bury", reason="why")
    page = (await admin.get("/deadletter/ns/q/jobs")).json()
    assert [(job["job_id"], job["last_error"]) for job in page["jobs"]] == [("stuck", "why")]
    assert (await admin.put("/queues/ns/q/pause")).json() == {"msg": "paused"}
    assert (await admin.put("/deadletter/ns/q/job/stuck")).json() == {"msg": "respawned", "count": 1}
    assert (await api.consume()).status_code == 404  # paused
    assert (await admin.delete("/queues/ns/q/pause")).json() == {"msg": "resumed"}
    assert await reserve(api) == "stuck"
    await put(api, "/job/stuck/bury")
    assert (await admin.delete("/deadletter/ns/q/job/stuck")).status_code == 204
    assert (await admin.delete("/deadletter/ns/q/job/stuck")).status_code == 404


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"priority": 256}, "invalid priority"),
        ({"priority": -1}, "invalid priority"),
        ({"backoff": "linear"}, "invalid backoff"),
        ({"backoff_ms": 10}, "backoff_ms needs backoff=exponential"),
        ({"backoff": "exponential", "backoff_ms": 0}, "invalid backoff_ms"),
        (
            {"backoff": "exponential", "backoff_ms": 500, "backoff_max_ms": 100},
            "backoff_max_ms is smaller than backoff_ms",
        ),
        ({"job_id": "order 42"}, "invalid job_id: 1 to 128 characters of A-Z a-z 0-9 - _ . :"),
        ({"job_id": "x" * 129}, "invalid job_id: 1 to 128 characters of A-Z a-z 0-9 - _ . :"),
        ({"job_id": ""}, "invalid job_id: 1 to 128 characters of A-Z a-z 0-9 - _ . :"),
        ({"job_id": "a,b"}, "a job_id list is for a bulk publish: one job, one id"),
        ({"unique_for": 10}, "unique_for needs a job_id: an id made by the server is never reused"),
    ],
)
async def test_bad_publish_parameters_are_refused_and_store_nothing(
    api: Api, query: dict[str, Any], error: str
) -> None:
    answer = await publish(api, **query)
    assert (answer.status_code, answer.json()) == (400, {"error": error})
    assert await api.size() == 0 and (await stats(api))["delayed"] == 0


async def test_a_bulk_needs_one_id_per_job(api: Api) -> None:
    answer = await api.client.put(
        "/api/ns/q/bulk", content=b"[1, 2]", params={"job_id": "only-one"}, headers=api.headers
    )
    assert (answer.status_code, answer.json()) == (400, {"error": "job_id should name one id per job of the bulk"})
    assert await api.size() == 0


async def test_bad_verb_parameters_change_nothing(api: Api) -> None:
    job_id = await api.publish(tries=2)
    await reserve(api, ttr_ms=60_000)
    cases = [
        ("release", {"reason": "x" * 1025}, "reason is longer than 1024 bytes"),
        ("release", {"delay": "1s"}, "invalid delay"),
        ("release", {"delay": 1, "delay_ms": 1}, "give delay or delay_ms, not both"),
        ("bury", {"reason": "é" * 513}, "reason is longer than 1024 bytes"),
        ("touch", {"ttr_ms": 0}, "invalid ttr"),
        ("touch", {"ttr": -1}, "invalid ttr"),
    ]
    for verb, query, error in cases:
        answer = await put(api, f"/job/{job_id}/{verb}", **query)
        assert (answer.status_code, answer.json()) == (400, {"error": error}), (verb, query)
    job = await state(api, job_id)
    assert (job["state"], job["last_error"], job["remain_tries"]) == ("reserved", None, 1)


async def test_engine_and_http_agree_on_a_business_id_published_in_process(api: Api, runtime: Any) -> None:
    """A job published through the engine (as a pusher or a cron tick will) reads the same over HTTP."""
    store = runtime.pools.get("default")
    assert (await store.publish("ns", "q", NewJob(b"inside", job_id="from-engine", priority=4))).created
    job = await state(api, "from-engine")
    assert (job["data"], job["priority"], job["state"]) == ("aW5zaWRl", 4, "ready")
