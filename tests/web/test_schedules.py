"""Recurring jobs (SPEC section 9) over HTTP on a real Runtime with its real scheduler, on a
standalone Redis and on Redis Clusters: register, list, replace, delete, jobs at each tick, the
admin's view, and bad input refused with nothing stored. Ticks through DST changes and missed
ticks run on a fixed clock (tests/store/test_schedules_clock.py); several processes: tests/e2e/test_schedules_e2e.py.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
import pytest

from tests.web.conftest import Api, wait_for


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def put(api: Api, name: str, body: bytes = b"tick", queue: str = "q", **query: Any) -> httpx.Response:
    return await api.client.put(f"/api/ns/{queue}/cron/{name}", content=body, params=query, headers=api.headers)


async def listed(api: Api, queue: str = "q") -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/ns/{queue}/cron", headers=api.headers)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["schedules"]
    return found


async def test_a_schedule_is_registered_listed_replaced_and_deleted(api: Api) -> None:
    before = now_ms()
    answer = await put(api, "nightly", cron="@daily", tz="Europe/Paris", ttl=600, tries=3, priority=7)
    assert answer.status_code == 201, answer.text
    assert answer.json()["msg"] == "scheduled"
    next_ms = answer.json()["next_ms"]
    assert before < next_ms <= before + 86_400_000
    assert time.strftime("%H:%M", time.gmtime(next_ms / 1000)) in ("22:00", "23:00")  # Paris midnight

    expected = {
        "name": "nightly",
        "cron": "0 0 * * *",
        "every": None,
        "tz": "Europe/Paris",
        "ttl": 600,
        "tries": 3,
        "priority": 7,
        "catchup": "one",
        "next_ms": next_ms,
        "last_ms": None,
        "last_job_id": None,
    }
    assert await listed(api) == [expected]
    one = await api.client.get("/api/ns/q/cron/nightly", headers=api.headers)
    assert one.status_code == 200 and one.json() == expected

    replaced = await put(api, "nightly", every=3600, catchup="none")
    assert replaced.status_code == 200, replaced.text
    [found] = await listed(api)
    assert (found["cron"], found["every"], found["tz"], found["catchup"]) == (None, 3600, "UTC", "none")
    assert abs(found["next_ms"] - (now_ms() + 3_600_000)) < 2000  # every=S is anchored at the registration

    deleted = await api.client.delete("/api/ns/q/cron/nightly", headers=api.headers)
    assert deleted.status_code == 204 and deleted.content == b""
    assert await listed(api) == []
    again = await api.client.delete("/api/ns/q/cron/nightly", headers=api.headers)
    assert again.status_code == 404 and again.json()["error"] == "schedule not found"
    missing = await api.client.get("/api/ns/q/cron/nightly", headers=api.headers)
    assert missing.status_code == 404


async def test_each_tick_publishes_one_job_with_the_schedules_data(api: Api) -> None:
    answer = await put(api, "beat", body=b"\x00payload", every=1, ttl=120, tries=2)
    first_tick = answer.json()["next_ms"]
    await wait_for(lambda: size_at_least(api, 2), timeout=5)
    [state] = await listed(api)
    assert state["last_ms"] >= first_tick + 1000 and state["next_ms"] > state["last_ms"]

    job = await api.consume_job()
    assert base64.b64decode(str(job["data"])) == b"\x00payload"
    assert job["remain_tries"] == 1 and 110 <= int(str(job["ttl"])) <= 120
    assert abs(int(str(job["elapsed_ms"])) - (now_ms() - first_tick)) < 1500
    await api.client.delete("/api/ns/q/cron/beat", headers=api.headers)


async def size_at_least(api: Api, count: int) -> bool:
    return await api.size() >= count


async def test_schedules_of_another_queue_are_not_listed_and_the_admin_sees_all(
    api: Api, admin: httpx.AsyncClient
) -> None:
    assert (await put(api, "a", cron="*/5 * * * *")).status_code == 201
    assert (await put(api, "b", queue="other", every=60)).status_code == 201
    assert [s["name"] for s in await listed(api)] == ["a"]
    everything = (await admin.get("/cron/ns")).json()["schedules"]
    assert [(s["queue"], s["name"]) for s in everything] == [("other", "b"), ("q", "a")]
    assert (await admin.delete("/cron/ns/other/b")).status_code == 204
    assert (await admin.delete("/cron/ns/other/b")).status_code == 404
    assert [s["name"] for s in (await admin.get("/cron/ns")).json()["schedules"]] == ["a"]
    assert (await admin.get("/cron/ns", params={"pool": "nope"})).status_code == 400


async def test_a_namespace_purge_deletes_its_schedules(api: Api, admin: httpx.AsyncClient) -> None:
    assert (await put(api, "a", every=30)).status_code == 201
    assert (await admin.delete("/namespaces/ns", params={"purge": "true"})).status_code == 200
    assert (await admin.get("/cron/ns")).json()["schedules"] == []


async def test_a_schedule_needs_the_namespaces_token(api: Api) -> None:
    answer = await api.client.put("/api/ns/q/cron/x", params={"every": 5})
    assert answer.status_code == 401
    answer = await api.client.get("/api/ns/q/cron", headers={"X-Token": "wrong"})
    assert answer.status_code == 401


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({}, "give cron=EXPR or every=SECONDS (one of them)"),
        ({"cron": "* * * * *", "every": "5"}, "give cron=EXPR or every=SECONDS (one of them)"),
        ({"every": "0"}, "invalid every"),
        ({"every": "1.5"}, "invalid every"),
        ({"every": str(367 * 86400)}, "invalid every"),
        ({"cron": "61 * * * *"}, "invalid cron: '61 * * * *' (Bad minute)"),
        ({"cron": "* * * *"}, "invalid cron: '* * * *' (Wrong number of fields)"),
        ({"cron": "0 0 30 2 *"}, "invalid cron: '0 0 30 2 *' (Bad day-of-month)"),
        ({"cron": "*/5 * * * * *"}, "invalid cron: '*/5 * * * * *' (5 fields: minute hour day month weekday)"),
        ({"cron": "@reboot"}, "invalid cron: '@reboot' (no such alias; @reboot means nothing to a queue)"),
        (
            {"every": "5", "tz": "Mars/Olympus"},
            "invalid tz: 'Mars/Olympus' is not an IANA time zone (like Europe/Paris)",
        ),
        (
            {"every": "5", "tz": "../../etc/passwd"},
            "invalid tz: '../../etc/passwd' is not an IANA time zone (like Europe/Paris)",
        ),
        ({"every": "5", "catchup": "all"}, "invalid catchup"),
        ({"every": "5", "tries": "0"}, "tries shouldn't be zero"),
        ({"every": "5", "priority": "256"}, "invalid priority"),
        ({"every": "5", "ttl": "-1"}, "invalid ttl"),
    ],
)
async def test_bad_input_is_a_400_and_stores_nothing(api: Api, query: dict[str, str], error: str) -> None:
    answer = await put(api, "s", **query)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": error}
    assert await listed(api) == []


async def test_bad_names_are_400(api: Api) -> None:
    assert (await put(api, "bad.name", every=5)).status_code == 400
    assert (await put(api, "x" * 256, every=5)).status_code == 400
    answer = await api.client.get("/api/ns/_q/cron", headers=api.headers)
    assert answer.status_code == 400
