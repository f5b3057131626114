"""The pump hands due jobs to this process's waiting consumes in its own step (store/handover.py),
against real Redis (standalone and cluster): reserved as reserve.lua would, answered without a
wake token or a reserve of the consume's own, exactly once, and given back when nobody is left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import keys, pools
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.handover import Mailbox
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import Job, NewJob, PusherWait

NS, Q, Q2, Q3 = "hand", "q1", "q2", "q3"
DUE_MS = 300
LONG_POLL_MS = 15_000


def counted(engine: Engine, verb: str) -> list[Any]:
    """Each call of an engine's verb (a Python count of its calls: Redis stays real)."""
    calls: list[Any] = []
    method = getattr(engine, verb)

    def counting(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        calls.append(args)
        return method(*args, **kwargs)

    setattr(engine, verb, counting)
    return calls


async def waiting(engine: Engine, how_many: int) -> None:
    """Until `how_many` consumes of the engine wait for NS's jobs."""
    deadline = time.monotonic() + 3
    while len(engine.handover.waiters(NS)) < how_many:
        assert time.monotonic() < deadline, "the consumes never waited"
        await asyncio.sleep(0.005)


def consuming(engine: Engine, queues: list[str], count: int = 1, **kwargs: Any) -> asyncio.Task[list[Job]]:
    # A long wait: the jobs come due DUE_MS after their publish, but a loaded machine (the suite on
    # more processes than cores) can hold a pump back for seconds; a consume that gave up would fail
    # the test for the machine's sake, not the handover's.
    return asyncio.create_task(engine.consume(NS, queues, 60_000, LONG_POLL_MS, count, **kwargs))


async def test_a_due_job_is_handed_to_the_waiting_consume(engine: Engine, pump: Pump) -> None:
    reserves = counted(engine, "reserve")
    task = consuming(engine, [Q])
    await waiting(engine, 1)
    job_id = (await engine.publish(NS, Q, NewJob(b"due", delay_ms=DUE_MS, tries=3))).job_id
    [job] = await task
    assert (job.job_id, job.body, job.remain_tries, job.attempts) == (job_id, b"due", 2, 1)
    assert len(reserves) == 1  # the first attempt's only: the pump reserved the due job
    assert await engine.redis.llen(keys.wake(NS, Q)) == 0  # no stray token
    stats = await engine.stats(NS, Q)
    assert (stats.ready, stats.delayed, stats.reserved) == (0, 0, 1)
    assert await engine.ack(NS, Q, job_id)
    assert await engine.timer_size(NS) == 0


async def test_exactly_once_under_two_waiters_and_two_engines(
    engine: Engine, pump: Pump, pool_config: PoolConfig
) -> None:
    other = pools.engine("default", pool_config)
    other_pump = Pump(other)
    other_pump.start()
    try:
        tasks = [consuming(e, [Q]) for e in (engine, engine, other, other)]
        await waiting(engine, 2)
        await waiting(other, 2)
        due = now_ms() + DUE_MS
        published = [(await engine.publish(NS, Q, NewJob(b"%d" % i, delay_ms=due - now_ms()))).job_id for i in range(6)]
        delivered = [job.job_id for task in tasks for job in await task]
        assert len(delivered) == 4
        while len(delivered) < len(published):  # the rest: ready, maybe a millisecond later
            more = await engine.consume(NS, [Q], 60_000, 1000, 10)
            assert more, f"lost: {set(published) - set(delivered)}"
            delivered += [job.job_id for job in more]
        assert sorted(delivered) == sorted(published)
    finally:
        await other_pump.stop()
        await other.close()


async def test_a_consume_gone_before_the_handover_leaves_the_job_ready_at_once(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"x", delay_ms=1, tries=2))).job_id
    releases = counted(engine, "release")
    mailbox = Mailbox([Q], 60_000, 1, frozen=False)
    engine.handover.join(NS, mailbox)
    await asyncio.sleep(0.01)
    pumping = asyncio.create_task(engine.pump(NS, now_ms()))
    await asyncio.sleep(0)  # the pump's script is on its way, for this mailbox
    assert engine.handover.leave(NS, mailbox) == []
    await pumping
    assert len(releases) == 1
    # Given back untried: ready again, its try and attempt returned, not reserved until its ttr.
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert (job.job_id, job.remain_tries, job.attempts) == (job_id, 1, 1)


async def test_a_paused_queue_is_not_handed_over(engine: Engine, pump: Pump) -> None:
    await engine.pause(NS, Q, True)
    task = asyncio.create_task(engine.consume(NS, [Q], 60_000, 800, 1))
    await waiting(engine, 1)
    await engine.publish(NS, Q, NewJob(b"held", delay_ms=DUE_MS))
    assert await task == []
    assert (await engine.stats(NS, Q)).ready == 1
    await engine.pause(NS, Q, False)
    assert len(await engine.consume(NS, [Q], 60_000, 0, 1)) == 1


async def test_priorities_and_the_queues_order_hold(engine: Engine) -> None:
    task = consuming(engine, [Q, Q2], count=3)
    await waiting(engine, 1)
    low = (await engine.publish(NS, Q, NewJob(b"low", delay_ms=1))).job_id
    high = (await engine.publish(NS, Q, NewJob(b"high", delay_ms=1, priority=9))).job_id
    second = (await engine.publish(NS, Q2, NewJob(b"q2", delay_ms=1))).job_id
    alone = (await engine.publish(NS, Q3, NewJob(b"nobody waits", delay_ms=1))).job_id
    await asyncio.sleep(0.01)
    await engine.pump(NS, now_ms())  # this test's only pump: every job comes due in the same step
    jobs = await task
    assert [job.job_id for job in jobs] == [high, low, second]
    # A queue nobody here waits on takes the old path: ready, with a wake token for any process.
    assert await engine.redis.llen(keys.wake(NS, Q3)) == 1
    assert [job.job_id for job in await engine.consume(NS, [Q3], 60_000, 0, 1)] == [alone]


async def test_a_pushers_consume_keeps_the_tries(engine: Engine, pump: Pump) -> None:
    reserves = counted(engine, "reserve")
    task = consuming(engine, [Q], pusher=PusherWait(asyncio.Event(), 5.0))
    await waiting(engine, 1)
    await engine.publish(NS, Q, NewJob(b"pushed", delay_ms=DUE_MS, tries=2))
    [job] = await task
    assert (job.remain_tries, job.attempts, len(reserves)) == (2, 1, 1)


async def test_a_waiting_consume_still_hears_that_redis_is_gone(engine: Engine) -> None:
    task = consuming(engine, [Q])
    await waiting(engine, 1)
    engine.wake_hub.fail_all(ConnectionError("redis stopped answering"))
    with pytest.raises(ConnectionError, match="stopped answering"):
        await task
    assert engine.handover.waiters(NS) == []
