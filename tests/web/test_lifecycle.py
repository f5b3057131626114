"""Job state transitions driven over HTTP, with the real pump, on both backends.

Timers are whole seconds in the HTTP API, so these tests wait about a second each;
long-polls (timeout=...) end as soon as the pump makes a job ready instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time

from tests.web.conftest import Api, wait_for


async def test_delayed_job_is_consumable_only_after_its_delay(api: Api) -> None:
    job_id = await api.publish(delay=1)
    assert (await api.consume()).status_code == 404
    assert await api.size() == 0
    started = time.monotonic()
    job = await api.consume_job(timeout=3)
    assert job["job_id"] == job_id
    assert 0.5 < time.monotonic() - started < 2.0
    assert job["elapsed_ms"] >= 1000  # type: ignore[operator]


async def test_ttr_expiry_redelivers_then_dead_letter_then_respawn(api: Api) -> None:
    job_id = await api.publish(tries=2)
    first = await api.consume_job(ttr=1)
    assert (first["job_id"], first["remain_tries"]) == (job_id, 1)
    assert (await api.consume()).status_code == 404  # reserved, not ready

    again = await api.consume_job(ttr=1, timeout=3)  # back once ttr passed
    assert (again["job_id"], again["remain_tries"]) == (job_id, 0)

    await wait_for(lambda: api.dead_size_above(0))  # no tries left: dead, not ready
    response = await api.get("/deadletter")
    assert (response.json()["deadletter_size"], response.json()["deadletter_head"]) == (1, job_id)
    assert await api.size() == 0

    response = await api.client.put("/api/ns/q/deadletter", params={"ttl": 100}, headers=api.headers)
    assert response.json() == {"msg": "respawned", "count": 1}
    respawned = await api.consume_job()
    assert respawned["job_id"] == job_id
    assert respawned["remain_tries"] == 0
    assert 98 <= respawned["ttl"] <= 100  # type: ignore[operator]


async def test_expired_and_acked_jobs_are_never_delivered(api: Api) -> None:
    await api.publish("expiring", ttl=1)
    acked = await api.publish()
    await api.consume_job(ttr=1)
    response = await api.client.delete(f"/api/ns/q/job/{acked}", headers=api.headers)
    assert response.status_code == 204
    assert (await api.get(f"/job/{acked}")).status_code == 404

    await asyncio.sleep(1.2)  # past both the ttl and the ttr
    assert (await api.consume("expiring,q")).status_code == 404
    response = await api.client.get("/api/ns/expiring/peek", headers=api.headers)
    assert (response.status_code, response.json()) == (404, {"error": "the queue is empty"})
    assert await api.dead_size() == 0
