"""The pump hands due jobs, and a publish a job ready now, to this process's waiting consumes in its
own step (store/handover.py), against real Redis (standalone and cluster): reserved as reserve.lua
would, answered without a wake token or a reserve of the consume's own, exactly once, and given
back when nobody is left."""

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
from lmstfy_py.types import Job, NewJob, PusherWait, SettingsChange
from tests.store.conftest import events_kept

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


def free_mailboxes(engine: Engine) -> list[Mailbox]:
    """The mailboxes a step may hand NS's jobs to now: waiting, empty, not claimed."""
    return [mailbox for mailbox in engine.handover.by_namespace.get(NS, ()) if mailbox.free]


async def waiting(engine: Engine, how_many: int) -> None:
    """Until `how_many` consumes of the engine wait for NS's jobs."""
    deadline = time.monotonic() + 3
    while len(free_mailboxes(engine)) < how_many:
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
    assert free_mailboxes(engine) == []


# -- a publish hands a job ready now to a consume waiting on its queue -------------------------


async def test_a_published_job_is_handed_to_the_waiting_consume_in_its_own_step(engine: Engine) -> None:
    reserves = counted(engine, "reserve")
    task = consuming(engine, [Q])
    await waiting(engine, 1)
    job_id = (await engine.publish(NS, Q, NewJob(b"now", tries=3))).job_id
    [job] = await task
    assert (job.job_id, job.body, job.remain_tries, job.attempts) == (job_id, b"now", 2, 1)
    assert len(reserves) == 1  # the consume's first attempt, before it waited: the publish reserved the job
    assert await engine.redis.llen(keys.wake(NS, Q)) == 0  # no stray token
    stats = await engine.stats(NS, Q)
    assert (stats.ready, stats.reserved) == (0, 1)
    assert await engine.timer_size(NS) == 1  # reserved on the timer at its ttr: a crash gives it back
    assert await engine.ack(NS, Q, job_id)


async def test_a_published_job_goes_to_one_waiter_exactly_once_across_engines(
    engine: Engine, pool_config: PoolConfig
) -> None:
    other = pools.engine("default", pool_config)
    try:
        tasks = [consuming(e, [Q]) for e in (engine, engine, other, other)]
        await waiting(engine, 2)
        await waiting(other, 2)
        published = [(await e.publish(NS, Q, NewJob(b"%d" % i))).job_id for i, e in enumerate([engine, other] * 3)]
        delivered = [job.job_id for task in tasks for job in await task]
        assert len(delivered) == len(set(delivered)) == 4
        delivered += [job.job_id for job in await engine.consume(NS, [Q], 60_000, 0, 10)]
        assert sorted(delivered) == sorted(published)
    finally:
        await other.close()


async def test_the_waiter_takes_the_oldest_ready_job_first(engine: Engine) -> None:
    older = (await engine.publish(NS, Q, NewJob(b"older"))).job_id
    mailbox = Mailbox([Q], 60_000, 1, frozen=False)  # a consume that began waiting as `older` came
    engine.handover.join(NS, mailbox)
    newer = (await engine.publish(NS, Q, NewJob(b"newer"))).job_id
    assert [job.job_id for job in mailbox.take()] == [older]
    engine.handover.leave(NS, mailbox)
    assert [job.job_id for job in await engine.consume(NS, [Q], 60_000, 0, 5)] == [newer]


async def test_a_bulk_publish_hands_its_first_jobs_one_to_each_waiter(engine: Engine) -> None:
    reserves = counted(engine, "reserve")
    tasks = [consuming(engine, [Q]) for _ in range(2)]
    await waiting(engine, 2)
    published = await engine.publish_many(NS, Q, [NewJob(b"%d" % i, delay_ms=i % 2 * 60_000) for i in range(5)])
    handed = sorted(job.job_id for jobs in await asyncio.gather(*tasks) for job in jobs)
    assert handed == sorted([published[0].job_id, published[2].job_id])  # the first two ready now
    assert len(reserves) == 2  # each consume's first attempt only
    stats = await engine.stats(NS, Q)
    assert (stats.ready, stats.delayed, stats.reserved) == (1, 2, 2)
    # The job left ready keeps its wake token for whoever comes: the waiters' BRPOP, finding only
    # claimed waiters, put it back (it may hold it for a moment, and then ends: nobody waits).
    deadline = time.monotonic() + 3
    while await engine.redis.llen(keys.wake(NS, Q)) != 1:
        assert time.monotonic() < deadline, "the wake token was lost"
        await asyncio.sleep(0.01)
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert job.job_id == published[4].job_id


async def test_two_publishes_at_once_never_hand_a_consume_more_than_its_count(engine: Engine) -> None:
    task = consuming(engine, [Q], count=1)
    await waiting(engine, 1)
    await asyncio.gather(*(engine.publish(NS, Q, NewJob(b"%d" % i)) for i in range(2)))
    assert len(await task) == 1
    assert (await engine.stats(NS, Q)).ready == 1


async def test_a_duplicate_publish_hands_nothing_and_leaves_the_waiter_waiting(engine: Engine) -> None:
    await engine.publish(NS, Q2, NewJob(b"first", job_id="taken"))
    await engine.consume(NS, [Q2], 60_000, 0, 1)  # reserved: the id is alive, a second publish is refused
    task = consuming(engine, [Q2])
    await waiting(engine, 1)
    assert not (await engine.publish(NS, Q2, NewJob(b"again", job_id="taken"))).created
    assert not task.done() and len(free_mailboxes(engine)) == 1  # still waiting, and claimable
    job_id = (await engine.publish(NS, Q2, NewJob(b"new"))).job_id
    assert [job.job_id for job in await task] == [job_id]


async def test_a_publish_keeps_the_queues_pause_and_limits(engine: Engine) -> None:
    await engine.pause(NS, Q, True)
    task = asyncio.create_task(engine.consume(NS, [Q], 60_000, 500, 1))
    await waiting(engine, 1)
    await engine.publish(NS, Q, NewJob(b"held"))
    assert await task == []
    await engine.pause(NS, Q, False)
    await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=1))
    [first] = await engine.consume(NS, [Q], 60_000, 0, 1)
    task = asyncio.create_task(engine.consume(NS, [Q], 60_000, 500, 1))
    await waiting(engine, 1)
    held = (await engine.publish(NS, Q, NewJob(b"over the limit"))).job_id
    assert await task == []  # one reserved already: max_reserved holds the new job back
    assert [info.job.job_id for info in await engine.next_jobs(NS, Q, 5)] == [held]
    assert await engine.ack(NS, Q, first.job_id)


async def test_a_consume_gone_before_the_publish_answers_leaves_the_job_ready_untried(engine: Engine) -> None:
    mailbox = Mailbox([Q], 60_000, 1, frozen=False)
    engine.handover.join(NS, mailbox)
    publishing = asyncio.create_task(engine.publish(NS, Q, NewJob(b"x", tries=2)))
    await asyncio.sleep(0)  # the publish's script is on its way, naming this mailbox
    assert engine.handover.leave(NS, mailbox) == []
    job_id = (await publishing).job_id
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert (job.job_id, job.remain_tries, job.attempts) == (job_id, 1, 1)


async def test_a_consume_on_several_queues_is_woken_as_before(engine: Engine) -> None:
    task = consuming(engine, [Q, Q2])
    await waiting(engine, 1)
    job_id = (await engine.publish(NS, Q2, NewJob(b"by the wake token"))).job_id
    assert [job.job_id for job in await task] == [job_id]


async def test_a_pushers_consume_handed_a_published_job_keeps_the_tries(engine: Engine) -> None:
    task = consuming(engine, [Q], pusher=PusherWait(asyncio.Event(), 5.0))
    await waiting(engine, 1)
    await engine.publish(NS, Q, NewJob(b"pushed", tries=2))
    [job] = await task
    assert (job.remain_tries, job.attempts) == (2, 1)


async def test_a_consume_behind_a_waiting_one_waits_at_once_and_gets_the_next_job(engine: Engine) -> None:
    reserves = counted(engine, "reserve")
    first = consuming(engine, [Q])
    await waiting(engine, 1)
    second = consuming(engine, [Q])  # the queue is empty, or the first would have been woken
    await waiting(engine, 2)
    assert len(reserves) == 1  # the first's own look only
    published = [(await engine.publish(NS, Q, NewJob(b"%d" % i))).job_id for i in range(2)]
    assert [job.job_id for task in (first, second) for job in await task] == published
    assert len(reserves) == 1


async def test_a_consume_behind_a_waiting_one_still_finds_a_job_left_ready(engine: Engine) -> None:
    mailbox = Mailbox([Q], 60_000, 1, frozen=False)  # a consume waiting as a job came, not yet woken
    engine.handover.join(NS, mailbox)
    engine.handover.claim(NS, 1, Q)  # ... and claimed: the job goes to whoever comes next
    job_id = (await engine.publish(NS, Q, NewJob(b"ready"))).job_id  # no waiter to hand it to: a token
    [job] = await engine.consume(NS, [Q], 60_000, 3_000, 1)  # waits first, woken by the token
    assert job.job_id == job_id
    engine.handover.leave(NS, mailbox)


async def _reserved_state(engine: Engine, queue: str, job: Job) -> dict[str, Any]:
    """What Redis holds of a reserved job and its queue, with what differs by id and clock left out."""
    job_key = keys.job(NS, queue, job.job_id)
    members = [
        (member, score)
        for member, score in await engine.redis.zrange(keys.timer(NS), 0, -1, withscores=True)
        if job.job_id.encode() in member
    ]
    job_hash = await engine.redis.hgetall(job_key)
    if b"c" in job_hash:  # a business id's creation time, kept
        job_hash[b"c"] = round(int(job_hash[b"c"]) / 10_000)
    meta = await engine.redis.hgetall(keys.meta(NS, queue))
    meta.pop(b"seq", None)  # the priority set's order counter: a job never made ready takes no number
    return {
        "hash": job_hash,
        "pttl_s": round(await engine.redis.pttl(job_key) / 10_000),
        "timer": sorted((member[-1:], round((score - now_ms()) / 10_000)) for member, score in members),
        "meta": meta,
        "wake": await engine.redis.llen(keys.wake(NS, queue)),
        "answer": (job.body, job.ttl // 10, job.remain_tries, job.attempts, job.created_ms is None, job.attributes),
        "events": [(e["kind"], e.get("attempt")) for e in await events_kept(engine, NS, queue, idle_s=0.1)],
    }


@pytest.mark.parametrize(
    "job",
    [
        NewJob(b"plain", tries=3),
        NewJob(b"forever", ttl_ms=0, tries=2, attributes={"a": "1"}),
        NewJob(b"x" * 300, priority=5, keep_s=600, tries=4),  # data in pieces; an expiry member too
        NewJob(b"named", job_id="business-id", unique_for_ms=60_000),
    ],
    ids=["plain", "forever", "kept-priority-pieces", "business-id"],
)
async def test_a_job_handed_over_by_its_publish_is_stored_as_a_consume_would_reserve_it(
    engine: Engine, job: NewJob
) -> None:
    """The publish stores a job that goes straight to a waiter reserved at once (no ready element,
    wake token or pop of its own): Redis must then hold what a publish followed by a reserve leaves."""
    for queue in (Q, Q3):
        await engine.set_queue_settings(NS, queue, SettingsChange(events=100))
    task = consuming(engine, [Q])
    await waiting(engine, 1)
    await engine.publish(NS, Q, job)
    [handed] = await task
    await engine.publish(NS, Q3, job)
    [reserved] = await engine.consume(NS, [Q3], 60_000, 0, 1)
    state = await _reserved_state(engine, Q, handed)
    assert state == await _reserved_state(engine, Q3, reserved)
    assert state["events"] == [("published", 0), ("reserved", 1)]
