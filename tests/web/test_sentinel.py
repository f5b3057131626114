"""The data API on a Sentinel-managed pool, across a failover.

The group (benchmarks/harness/redis_groups.py) is a master, its replica and a sentinel, with passwords on
both the data nodes and the sentinel. `SENTINEL FAILOVER` promotes the replica while the old
master keeps running: requests may fail with 503 while the master moves, but the server
follows the new master by itself within a few seconds, and every job the replica had
before the failover is still delivered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from benchmarks.harness.redis_groups import SentinelGroup
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from tests.web.conftest import Api

RECOVERY_S = 10.0  # bounds the wait for the server to follow the new master; it takes about 1-2 s


@pytest.fixture
async def runtime(sentinel_config: PoolConfig) -> AsyncIterator[Runtime]:
    """Overrides tests/web/conftest.py's: every app fixture of this module runs on the Sentinel pool."""
    started = await Runtime.start(Config(pools={"default": sentinel_config}))
    try:
        yield started
    finally:
        await started.stop()


async def test_the_api_works_through_the_sentinel(api: Api) -> None:
    job_id = await api.publish(body=b"hello")
    delayed_id = await api.publish(body=b"later", delay=1)
    assert await api.size() == 1
    job = await api.consume_job()
    assert (job["job_id"], job["data"]) == (job_id, "aGVsbG8=")
    assert (await api.client.delete(f"/api/ns/q/job/{job_id}", headers=api.headers)).status_code == 204
    assert (await api.consume_job(timeout=3))["job_id"] == delayed_id  # the pump runs through the sentinel too
    dead_id = await api.kill_one()
    assert (await api.get("/deadletter")).json()["deadletter_head"] == dead_id


async def test_server_follows_a_failover_and_keeps_every_replicated_job(
    api: Api, sentinel_group: SentinelGroup
) -> None:
    before = {await api.publish(body=f"job {i}".encode()) for i in range(20)}
    before.add(await api.publish(body=b"delayed", delay=1))
    with sentinel_group.master().client() as master:
        assert master.execute_command("WAIT", 1, 2000) == 1  # the replica has every job
    long_poll = asyncio.create_task(api.consume("idle", timeout=20))
    await asyncio.sleep(0.2)  # blocked on the master that is about to step down

    old, new = await asyncio.to_thread(sentinel_group.failover)
    later = await _publish_until_stored_on(api, new, "later")
    # The sentinel would demote the old master at its next look (up to 10 s); do it now. That
    # cuts the long-poll's wait on it short (UNBLOCKED): it must carry on against the new master.
    await asyncio.to_thread(sentinel_group.demote, old, new)
    idle = await api.publish("idle")
    response = await asyncio.wait_for(long_poll, RECOVERY_S * 2)
    assert response.status_code == 200, response.text
    assert response.json()["job_id"] == idle

    assert await _consume_all(api) == before
    assert later in await _consume_all(api, "later")  # stored on the new master: it survives too


async def test_server_recovers_when_the_master_dies(api: Api, sentinel_group: SentinelGroup) -> None:
    before = {await api.publish(body=f"job {i}".encode()) for i in range(20)}
    with sentinel_group.master().client() as master:
        assert master.execute_command("WAIT", 1, 2000) == 1
    dead, new = await asyncio.to_thread(sentinel_group.crash_master)
    try:
        after = await _publish_until_stored_on(api, new, "q")
        assert await _consume_all(api) == before | {after}
    finally:
        await asyncio.to_thread(sentinel_group.revive, dead, new)


async def _publish_until_stored_on(api: Api, node: RedisProcess, queue: str) -> str:
    """Publishes until a publish lands on `node` (503s and jobs written to the old master are
    the failover's window); returns the id of the one that did."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        assert time.monotonic() < deadline, "the server did not follow the new master"
        response = await api.client.put(f"/api/ns/{queue}", content=b"after", headers=api.headers)
        assert response.status_code in (201, 503), response.text
        if response.status_code == 201:
            job_id: str = response.json()["job_id"]
            with node.client() as conn:
                if conn.exists(keys.job("ns", queue, job_id)):
                    return job_id
        await asyncio.sleep(0.1)


async def _consume_all(api: Api, queue: str = "q") -> set[str]:
    consumed: set[str] = set()
    while True:
        response = await api.consume(queue, timeout=1)
        if response.status_code == 404:
            return consumed
        assert response.status_code == 200, response.text
        job_id = response.json()["job_id"]
        consumed.add(job_id)
        assert (await api.client.delete(f"/api/ns/{queue}/job/{job_id}", headers=api.headers)).status_code == 204
