"""SPEC 14 over HTTP on every backend of the `runtime` fixture (standalone, Redis Clusters): the flow
settings and their admin twin, every bad value refused with nothing changed, `group` on publish, bulk
and republish, a job's group in its state, promote and its admin twin, and the stats' delay horizon.
The limits' behaviour under load and across processes is tests/e2e/test_flow_e2e.py's."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.web.conftest import Api, MakeToken, auth

DEFAULTS = {"keep": 0, "events": 0, "max_reserved": 0, "rate": 0, "burst": None, "group_concurrency": 1}
UINT32_MAX = 4294967295
LONG_GROUP = "g" * 129


def refusal(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


def shown(queue: str = "q", **settings: Any) -> dict[str, Any]:
    return {"namespace": "ns", "queue": queue, **DEFAULTS, **settings}


async def settings(api: Api, queue: str = "q") -> dict[str, Any]:
    response = await api.client.get(f"/api/ns/{queue}/settings", headers=api.headers)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def put_settings(api: Api, **query: Any) -> httpx.Response:
    return await api.client.put("/api/ns/q/settings", params=query, headers=api.headers)


async def put(api: Api, path: str, **query: Any) -> httpx.Response:
    return await api.client.put(f"/api/ns/q{path}", params=query, headers=api.headers)


async def publish(api: Api, **query: Any) -> str:
    response = await api.client.put("/api/ns/q", params=query, content=b"x", headers=api.headers)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def state(api: Api, job_id: str) -> dict[str, Any]:
    response = await api.get(f"/job/{job_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def stats(api: Api) -> dict[str, Any]:
    found: dict[str, Any] = (await api.client.get("/api/ns/q/stats", headers=api.headers)).json()
    return found


# -- the settings -------------------------------------------------------------------------------


async def test_flow_settings_default_to_none_and_are_set_and_shown(api: Api) -> None:
    assert await settings(api, "never-used") == shown("never-used")
    response = await put_settings(api, max_reserved=UINT32_MAX, rate="2.25", burst=7, group_concurrency=65535)
    expected = shown(max_reserved=UINT32_MAX, rate=2.25, burst=7, group_concurrency=65535)
    assert (response.status_code, response.json()) == (200, expected)
    assert await settings(api) == expected
    # An integral rate reads as an integer; the other settings stay as they were.
    assert (await put_settings(api, rate="10")).json() == {**expected, "rate": 10}
    assert (await put_settings(api, rate="0.5", max_reserved=0)).json() == {**expected, "rate": 0.5, "max_reserved": 0}
    # `burst=` with no value unsets it: null again (the bucket's size is then max(1, ceil(rate))).
    assert (await put_settings(api, burst="")).json()["burst"] is None
    assert (await put_settings(api, rate="1000000", burst=1000000)).json()["rate"] == 1000000
    assert (await put_settings(api, rate="0", group_concurrency=1)).json() == shown(max_reserved=0, burst=1000000)


BAD_VALUES = {
    "max_reserved": ["-1", "", "x", "1.5", str(UINT32_MAX + 1), " 1"],
    "rate": ["", "-1", "1e3", ".5", "5.", "1000000.5", "1000001", "1.1234567", "x", "+1", "0x10", "nan", "inf"],
    "burst": ["0", "-1", "1000001", "1.5", "x"],
    "group_concurrency": ["0", "", "-1", "65536", "x"],
}


async def test_a_refused_flow_settings_put_names_its_fault_and_changes_nothing(api: Api) -> None:
    before = (await put_settings(api, keep=5, max_reserved=3, rate="1.5", burst=4, group_concurrency=2)).json()
    for name, values in BAD_VALUES.items():
        for value in values:
            # A good value given beside the bad one is not set either: the PUT is checked whole.
            query = {"keep": 60, "events": 10, name: value}
            assert refusal(await put_settings(api, **query)) == (400, {"error": f"invalid {name}"}), query
    assert refusal(await put_settings(api, rate="2", max_rate=1)) == (400, {"error": "unknown setting: max_rate"})
    assert refusal(await put_settings(api, group="a")) == (400, {"error": "unknown setting: group"})
    assert refusal(await put_settings(api)) == (400, {"error": "no setting given"})
    assert await settings(api) == before


async def test_the_admin_twin_shows_and_sets_the_flow_settings(admin: httpx.AsyncClient, api: Api) -> None:
    response = await admin.put("/queues/ns/q/settings", params={"rate": "3", "burst": 9, "pool": "default"})
    assert (response.status_code, response.json()) == (200, shown(rate=3, burst=9))
    assert (await admin.get("/queues/ns/q/settings")).json() == await settings(api)
    assert refusal(await admin.put("/queues/ns/q/settings", params={"max_reserved": "-1"})) == (
        400,
        {"error": "invalid max_reserved"},
    )
    assert refusal(await admin.put("/queues/ns/q/settings", params={"burst": 0})) == (400, {"error": "invalid burst"})
    assert await settings(api) == shown(rate=3, burst=9)


# -- groups ---------------------------------------------------------------------------------------


async def test_a_bad_group_refuses_every_publish_and_stores_nothing(api: Api) -> None:
    job_id = await api.publish()
    assert (await api.consume_job())["job_id"] == job_id
    for group in ("", LONG_GROUP, "a b", "a/b", "é", "a,b"):
        for response in await api.publish_every_way(job_id, group=group):
            assert refusal(response) == (400, {"error": "invalid group"}), group
    assert (await stats(api))["ready"] == 0
    assert (await state(api, job_id))["state"] == "reserved"  # the republish ACKed nothing


async def test_a_jobs_state_shows_its_group(api: Api) -> None:
    plain = await api.publish()
    grouped = await publish(api, group="order-42.A:b_c")
    longest = await publish(api, group="g" * 128)
    bulk = await api.client.put("/api/ns/q/bulk", params={"group": "bulk"}, content=b"[1,2]", headers=api.headers)
    assert bulk.status_code == 201, bulk.text
    assert (await state(api, plain))["group"] is None
    assert (await state(api, grouped))["group"] == "order-42.A:b_c"
    assert (await state(api, longest))["group"] == "g" * 128
    assert [(await state(api, job_id))["group"] for job_id in bulk.json()["job_ids"]] == ["bulk", "bulk"]
    # Republish gives the new job its group, as it gives the other publish options.
    old = (await api.consume_job())["job_id"]
    response = await api.client.put(
        f"/api/ns/q/job/{old}", params={"group": "again"}, content=b"x", headers=api.headers
    )
    assert (await state(api, response.json()["job_id"]))["group"] == "again"


async def test_the_admin_job_look_up_shows_the_group(admin: httpx.AsyncClient, api: Api) -> None:
    job_id = await publish(api, group="g1")
    assert (await admin.get(f"/queues/ns/q/job/{job_id}")).json()["group"] == "g1"


# -- promote --------------------------------------------------------------------------------------


async def test_promote_makes_a_delayed_job_ready_now(api: Api) -> None:
    job_id = await publish(api, delay=3600, priority=7, group="g")
    assert (await state(api, job_id))["state"] == "delayed"
    response = await put(api, f"/job/{job_id}/promote")
    assert (response.status_code, response.json()) == (200, {"msg": "promoted"})
    promoted = await state(api, job_id)
    assert (promoted["state"], promoted["priority"], promoted["group"]) == ("ready", 7, "g")
    assert (await api.consume_job(timeout=1))["job_id"] == job_id
    not_delayed = (409, {"error": "job is not delayed"})
    assert refusal(await put(api, f"/job/{job_id}/promote")) == not_delayed  # reserved
    dead = await api.kill_one()
    assert refusal(await put(api, f"/job/{dead}/promote")) == not_delayed
    ready = await api.publish()
    assert refusal(await put(api, f"/job/{ready}/promote")) == not_delayed
    assert refusal(await put(api, "/job/no-such-job/promote")) == (404, {"error": "job not found"})
    assert refusal(await put(api, "/job/b@d/promote")) == (400, {"error": "invalid job id"})


async def test_promote_takes_the_namespaces_token(data: httpx.AsyncClient, api: Api, make_token: MakeToken) -> None:
    job_id = await api.publish(delay=3600)
    other = await make_token("other")
    assert refusal(await data.put(f"/api/ns/q/job/{job_id}/promote")) == (401, {"error": "token not found"})
    response = await data.put(f"/api/ns/q/job/{job_id}/promote", headers=auth(other))
    assert refusal(response) == (401, {"error": "invalid token"})
    assert (await state(api, job_id))["state"] == "delayed"


async def test_the_admin_twin_promotes(admin: httpx.AsyncClient, api: Api) -> None:
    job_id = await api.publish(delay=3600)
    response = await admin.put(f"/queues/ns/q/job/{job_id}/promote", params={"pool": "default"})
    assert (response.status_code, response.json()) == (200, {"msg": "promoted"})
    assert (await state(api, job_id))["state"] == "ready"
    assert refusal(await admin.put(f"/queues/ns/q/job/{job_id}/promote")) == (409, {"error": "job is not delayed"})
    assert refusal(await admin.put("/queues/ns/q/job/gone/promote")) == (404, {"error": "job not found"})
    assert refusal(await admin.put("/queues/ns/q/job/x/promote", params={"pool": "nope"})) == (
        400,
        {"error": "pool not found"},
    )


# -- the delay horizon ----------------------------------------------------------------------------


async def test_stats_show_the_oldest_ready_job_and_the_delayed_ones_by_time_left(api: Api) -> None:
    empty = await stats(api)
    assert (empty["oldest_ready_ms"], empty["due"]) == (None, {"1m": 0, "1h": 0, "1d": 0, "later": 0})
    before = time.time_ns() // 1_000_000
    await api.publish()
    after = time.time_ns() // 1_000_000
    await publish(api, group="g")
    for delay in (30, 1800, 1801, 5 * 3600, 3 * 86400):
        await api.publish(delay=delay, ttl=0)
    found = await stats(api)
    assert before <= found["oldest_ready_ms"] <= after
    assert (found["ready"], found["delayed"]) == (2, 5)  # the grouped job counts as ready
    assert found["due"] == {"1m": 1, "1h": 2, "1d": 1, "later": 1}
