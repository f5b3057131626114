"""A queue's next jobs (Engine.next_jobs, the dashboard's queue page): the order consumes deliver
them, read only, against real Redis (standalone and clusters: one script, one slot)."""

from __future__ import annotations

import asyncio

from lmstfy_py.store.engine import PEEK_SCAN, Engine
from lmstfy_py.types import NewJob

NS, Q = "ns1", "q1"


async def publish(engine: Engine, body: bytes, **options: int) -> str:
    return (await engine.publish(NS, Q, NewJob(body, **options))).job_id  # type: ignore[arg-type]


async def consume_ids(engine: Engine) -> list[str]:
    """Consumes every ready job, one at a time: the delivery order."""
    delivered = []
    while jobs := await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1):
        delivered.append(jobs[0].job_id)
    return delivered


async def test_the_next_jobs_come_in_the_order_consumes_deliver_them(engine: Engine) -> None:
    plain_1 = await publish(engine, b"plain 1")
    high = await publish(engine, b"high", priority=9)
    mid_1 = await publish(engine, b"mid 1", priority=5)
    plain_2 = await publish(engine, b"plain 2")
    mid_2 = await publish(engine, b"mid 2", priority=5)
    await publish(engine, b"later", delay_ms=600_000)  # delayed: not next
    expected = [high, mid_1, mid_2, plain_1, plain_2]

    listed = await engine.next_jobs(NS, Q, 10)
    assert [info.job.job_id for info in listed] == expected
    shown = [(info.job.body, info.priority, info.state) for info in listed[:2]]
    assert shown == [(b"high", 9, "ready"), (b"mid 1", 5, "ready")]
    assert [info.job.job_id for info in await engine.next_jobs(NS, Q, 3)] == expected[:3]
    assert await engine.next_jobs(NS, Q, 0) == []

    # Read only: nothing was reserved, no attempt counted.
    stats = await engine.stats(NS, Q)
    assert (stats.ready, stats.delayed, stats.reserved) == (5, 1, 0)
    looked_up = [await engine.peek_job(NS, Q, job_id) for job_id in expected]
    assert [(info.state, info.job.attempts) for info in looked_up] == [("ready", 0)] * 5
    assert await consume_ids(engine) == expected
    assert await engine.next_jobs(NS, Q, 10) == []  # reserved jobs are not next


async def test_jobs_whose_data_expired_are_skipped(engine: Engine) -> None:
    await publish(engine, b"gone", priority=3, ttl_ms=50)
    kept_priority = await publish(engine, b"kept", priority=3)
    await publish(engine, b"gone", ttl_ms=50)
    await publish(engine, b"gone", ttl_ms=50)
    kept = await publish(engine, b"kept")
    await asyncio.sleep(0.1)
    listed = await engine.next_jobs(NS, Q, 10)
    assert [info.job.job_id for info in listed] == [kept_priority, kept]
    # The limit counts live jobs: the expired ones before `kept` take none of it.
    assert [info.job.job_id for info in await engine.next_jobs(NS, Q, 2)] == [kept_priority, kept]


async def test_past_the_scan_of_expired_jobs_fewer_are_listed_never_out_of_order(engine: Engine) -> None:
    expired = [NewJob(b"gone", ttl_ms=50, priority=2)] * (PEEK_SCAN + 1)
    await engine.publish_many(NS, Q, expired)
    behind = await publish(engine, b"after the expired ones", priority=2)
    plain = await publish(engine, b"plain")
    await asyncio.sleep(0.1)
    # Asked for one, it looks at PEEK_SCAN + 1 elements of the priority set, all expired: the
    # ready list's job is not listed ahead of `behind`, which a consume gets first.
    assert await engine.next_jobs(NS, Q, 1) == []
    assert [info.job.job_id for info in await engine.next_jobs(NS, Q, 10)] == [behind, plain]
    assert await consume_ids(engine) == [behind, plain]


async def test_a_paused_queues_next_jobs_are_listed(engine: Engine) -> None:
    first, second = await publish(engine, b"1"), await publish(engine, b"2", priority=1)
    await engine.pause(NS, Q, True)
    assert [info.job.job_id for info in await engine.next_jobs(NS, Q, 10)] == [second, first]
    assert await consume_ids(engine) == []  # listed, and not delivered until resumed
    await engine.pause(NS, Q, False)
    assert await consume_ids(engine) == [second, first]


async def test_a_released_job_is_listed_with_its_attempts_and_last_error(engine: Engine) -> None:
    job_id = await publish(engine, b"retry", tries=3)
    assert await consume_ids(engine) == [job_id]
    await engine.release(NS, Q, job_id, delay_ms=0, reason="smtp timeout")
    [info] = await engine.next_jobs(NS, Q, 10)
    assert (info.job.job_id, info.job.attempts, info.job.remain_tries) == (job_id, 1, 2)
    assert info.last_error == "smtp timeout"
    assert info.job.created_ms is not None and 86_399 <= info.job.ttl <= 86_400
