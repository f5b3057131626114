"""Job outcomes (SPEC 13) in the engine, against real Redis (standalone and clusters): queue
settings, keep and the records ended jobs leave, complete, and result() waits."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.schedules import Schedule
from lmstfy_py.store import keys, pools, schedule_ops
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pump import Pump
from lmstfy_py.store.scheduler import Scheduler
from lmstfy_py.types import JobInfo, NewJob, QueueSettings, SettingsChange

NS, Q = "ns1", "q1"


async def reserved(engine: Engine, job: NewJob, queue: str = Q) -> str:
    job_id = (await engine.publish(NS, queue, job)).job_id
    [got] = await engine.consume(NS, [queue], ttr_ms=60_000, timeout_ms=0, count=1)
    assert got.job_id == job_id
    return job_id


def assert_record(info: JobInfo, state: str, keep_s: int, body: bytes, result: bytes | None, before_ms: int) -> None:
    assert (info.state, info.job.body, info.result, info.due_ms) == (state, body, result, None)
    assert keep_s - 1 <= info.job.ttl <= keep_s
    assert info.finished_ms is not None and before_ms <= info.finished_ms <= now_ms()


async def test_settings_round_trip_need_no_job_and_survive_destroy(engine: Engine) -> None:
    assert await engine.queue_settings(NS, Q) == QueueSettings(0, 0)
    assert await engine.set_queue_settings(NS, Q, SettingsChange(60, None)) == QueueSettings(60, 0)
    assert await engine.set_queue_settings(NS, Q, SettingsChange(None, 500)) == QueueSettings(60, 500)
    assert await engine.set_queue_settings(NS, Q, SettingsChange(None, None)) == QueueSettings(60, 500)
    await engine.publish(NS, Q, NewJob(b"x"))
    assert await engine.destroy(NS, Q) == 1
    assert await engine.queue_settings(NS, Q) == QueueSettings(60, 500)
    assert await engine.queue_settings(NS, "other") == QueueSettings(0, 0)
    await engine.publish(NS, Q, NewJob(b"x"))
    assert await engine.purge_namespace(NS) == 1  # settings are configuration: a purge keeps them too
    assert await engine.queue_settings(NS, Q) == QueueSettings(60, 500)


async def test_complete_keeps_the_result_for_the_keep(engine: Engine) -> None:
    before = now_ms()
    job_id = await reserved(engine, NewJob(b"work", keep_s=30))
    await engine.complete(NS, Q, job_id, b"the answer")
    info = await engine.peek_job(NS, Q, job_id)
    assert_record(info, "completed", 30, b"work", b"the answer", before)
    assert (info.job.attempts, info.last_error) == (1, None)
    assert await engine.stats(NS, Q) == await engine.stats(NS, "empty")  # no count holds it
    assert await engine.timer_size(NS) == 0


async def test_keep_from_the_queue_setting_read_at_publish(engine: Engine) -> None:
    await engine.set_queue_settings(NS, Q, SettingsChange(20, None))
    kept = await reserved(engine, NewJob(b"a"))
    await engine.set_queue_settings(NS, Q, SettingsChange(0, None))
    gone = await reserved(engine, NewJob(b"b"))
    overridden = await reserved(engine, NewJob(b"c", keep_s=40))
    assert await engine.ack_many(NS, Q, [kept, gone, overridden]) == 3
    assert (await engine.peek_job(NS, Q, kept)).state == "completed"
    assert 39 <= (await engine.peek_job(NS, Q, overridden)).job.ttl <= 40
    with pytest.raises(NotFound):
        await engine.peek_job(NS, Q, gone)


async def test_keep_zero_leaves_nothing(engine: Engine) -> None:
    job_id = await reserved(engine, NewJob(b"x", keep_s=0))
    await engine.complete(NS, Q, job_id, b"r")
    assert not await engine.redis.exists(keys.job(NS, Q, job_id))


async def test_ack_carried_by_a_consume_and_republish_complete_jobs(engine: Engine) -> None:
    before = now_ms()
    carried = await reserved(engine, NewJob(b"carried", keep_s=30))
    await engine.publish(NS, Q, NewJob(b"next", keep_s=30))
    [nxt] = await engine.consume(NS, [Q], 60_000, 0, 1, acks={Q: [carried]})
    assert_record(await engine.peek_job(NS, Q, carried), "completed", 30, b"carried", None, before)
    replacement = await engine.publish(NS, Q, NewJob(b"again"), replaces=nxt.job_id)
    assert_record(await engine.peek_job(NS, Q, nxt.job_id), "completed", 30, b"next", None, before)
    assert (await engine.peek_job(NS, Q, replacement.job_id)).state == "ready"


async def test_deleted_records_of_dead_and_destroyed_jobs(engine: Engine) -> None:
    before = now_ms()
    dead = [await reserved(engine, NewJob(b"d%d" % i, keep_s=30)) for i in range(2)]
    for job_id in dead:
        await engine.bury(NS, Q, job_id, "boom")
    await engine.delete_dead_one(NS, Q, dead[0])
    assert await engine.delete_dead(NS, Q, 10) == 1
    for job_id, body in zip(dead, [b"d0", b"d1"], strict=True):
        info = await engine.peek_job(NS, Q, job_id)
        assert_record(info, "deleted", 30, body, None, before)
        assert (info.last_error, info.job.attempts) == ("boom", 1)
    ready = (await engine.publish(NS, Q, NewJob(b"ready", keep_s=30))).job_id
    prioritized = (await engine.publish(NS, Q, NewJob(b"prio", keep_s=30, priority=5))).job_id
    plain = (await engine.publish(NS, Q, NewJob(b"plain"))).job_id
    assert await engine.destroy(NS, Q) == 3
    assert_record(await engine.peek_job(NS, Q, ready), "deleted", 30, b"ready", None, before)
    assert_record(await engine.peek_job(NS, Q, prioritized), "deleted", 30, b"prio", None, before)
    with pytest.raises(NotFound):
        await engine.peek_job(NS, Q, plain)


async def test_a_recurring_jobs_fire_takes_the_queues_keep(engine: Engine) -> None:
    await engine.set_queue_settings(NS, Q, SettingsChange(30, None))
    plan = Schedule("s", Q, None, 60, "UTC", b"cron", 3_600_000, 1, 0, "one")
    _, first = await schedule_ops.put(engine, NS, plan, now_ms())
    await Scheduler(engine, lambda: first).tick()
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert await engine.ack(NS, Q, job.job_id)
    info = await engine.peek_job(NS, Q, job.job_id)
    assert (info.state, info.job.body) == ("completed", b"cron")


async def test_a_record_is_replaced_by_a_publish_of_its_id_unless_unique_for(engine: Engine) -> None:
    job_id = await reserved(engine, NewJob(b"first", job_id="biz-1", keep_s=30))
    await engine.complete(NS, Q, job_id, b"r")
    again = await engine.publish(NS, Q, NewJob(b"second", job_id="biz-1"))
    assert again.created
    info = await engine.peek_job(NS, Q, "biz-1")
    shown = (info.state, info.job.body, info.result, info.finished_ms, info.job.ttl)
    assert shown == ("ready", b"second", None, None, 86_400)
    unique = await reserved(engine, NewJob(b"u", job_id="biz-2", keep_s=30, unique_for_ms=60_000), "q2")
    await engine.complete(NS, "q2", unique, b"r")
    assert not (await engine.publish(NS, "q2", NewJob(b"dup", job_id="biz-2"))).created
    assert (await engine.peek_job(NS, "q2", "biz-2")).result == b"r"


async def test_complete_refusals_change_nothing(engine: Engine) -> None:
    with pytest.raises(NotFound, match="job not found"):
        await engine.complete(NS, Q, "nope", b"r")
    ready = (await engine.publish(NS, "q2", NewJob(b"ready", keep_s=30))).job_id
    with pytest.raises(Conflict, match="job is not reserved"):
        await engine.complete(NS, "q2", ready, b"r")
    assert (await engine.peek_job(NS, "q2", ready)).state == "ready"
    done = await reserved(engine, NewJob(b"done", keep_s=30))
    await engine.complete(NS, Q, done, b"first")
    for verb in (
        engine.complete(NS, Q, done, b"second"),
        engine.release(NS, Q, done, 0, ""),
        engine.touch(NS, Q, done, 1000),
        engine.bury(NS, Q, done, ""),
    ):
        with pytest.raises(Conflict, match="job is not reserved"):
            await verb
    assert await engine.ack(NS, Q, done) is False  # an ACK leaves a record alone
    info = await engine.peek_job(NS, Q, done)
    assert (info.state, info.result) == ("completed", b"first")


async def test_reserve_never_delivers_a_record(engine: Engine) -> None:
    # A stale element: its job expired (ttl), the id was published again, and that job completed.
    await engine.publish(NS, Q, NewJob(b"old", job_id="biz", ttl_ms=50))
    await asyncio.sleep(0.1)
    job_id = await reserved(engine, NewJob(b"new", job_id="biz", keep_s=30))
    await engine.complete(NS, Q, job_id, b"r")
    assert await engine.consume(NS, [Q], 60_000, 0, 1) == []
    assert (await engine.peek_job(NS, Q, "biz")).state == "completed"


async def test_the_pump_never_revives_a_record(engine: Engine, pump: Pump) -> None:
    # A stale timer member: its delayed job expired, the id was published again, and that job completed.
    await engine.publish(NS, Q, NewJob(b"old", job_id="biz", ttl_ms=50, delay_ms=300))
    await asyncio.sleep(0.1)
    job_id = await reserved(engine, NewJob(b"new", job_id="biz", keep_s=30))
    await engine.complete(NS, Q, job_id, b"r")
    await asyncio.sleep(0.6)  # the member came due
    assert await engine.timer_size(NS) == 0
    assert await engine.consume(NS, [Q], 60_000, 0, 1) == []
    assert (await engine.peek_job(NS, Q, "biz")).state == "completed"


async def test_a_kept_job_whose_ttl_passes_leaves_an_expired_record_consumed_or_not(engine: Engine, pump: Pump) -> None:
    before = now_ms()
    waiting = (await engine.publish(NS, Q, NewJob(b"ready", ttl_ms=1000, keep_s=30))).job_id
    taken = await reserved(engine, NewJob(b"taken", ttl_ms=1000, keep_s=30), "q2")
    delayed = (await engine.publish(NS, Q, NewJob(b"later", ttl_ms=1000, delay_ms=5000, keep_s=30))).job_id
    plain = (await engine.publish(NS, "q3", NewJob(b"plain", ttl_ms=1000))).job_id  # lmstfy's: gone
    assert (await engine.peek_job(NS, Q, waiting)).job.ttl == 1  # the ttl it was given, not its keep too
    [listed] = await engine.next_jobs(NS, Q, 1)
    assert listed.job.ttl == 1
    await asyncio.sleep(2.1)  # its ttl, and the second it may take to be ended
    for job_id, queue, body in ((waiting, Q, b"ready"), (taken, "q2", b"taken"), (delayed, Q, b"later")):
        info = await engine.peek_job(NS, queue, job_id)
        assert_record(info, "expired", 30, body, None, before)
        assert info.finished_ms is not None and info.finished_ms <= before + 2100
    with pytest.raises(NotFound):
        await engine.peek_job(NS, "q3", plain)
    assert await engine.stats(NS, Q) == await engine.stats(NS, "empty")
    assert await engine.stats(NS, "q2") == await engine.stats(NS, "empty")
    assert await engine.timer_size(NS) == 0
    with pytest.raises(Conflict):
        await engine.complete(NS, "q2", taken, b"late")
    assert await engine.consume(NS, [Q, "q2"], 60_000, 0, 1) == []


async def test_result_of_an_ended_job_at_once_and_of_a_live_one_after_its_wait(engine: Engine) -> None:
    with pytest.raises(NotFound, match="job not found"):
        await engine.result(NS, Q, "nope", 1000)
    done = await reserved(engine, NewJob(b"done", keep_s=30))
    await engine.complete(NS, Q, done, b"r")
    ended, info = await engine.result(NS, Q, done, 5000)
    assert (ended, info.state, info.result) == (True, "completed", b"r")
    live = (await engine.publish(NS, Q, NewJob(b"live"))).job_id
    assert (await engine.result(NS, Q, live, 0))[0] is False
    started = time.monotonic()
    ended, info = await engine.result(NS, Q, live, 300)
    assert (ended, info.state) == (False, "ready")
    assert time.monotonic() - started >= 0.3


async def waiters_present(engine: Engine, job_id: str, count: int, queue: str = Q) -> None:
    """Until `count` waiters of the job are present (counted, so told of its end): a fixed sleep let a
    loaded machine end the job before the last one counted itself, and with keep 0 that one found
    nothing to read (SPEC 13 promises the end to a waiter present at it)."""
    deadline = time.monotonic() + 10
    while int(await engine.redis.get(keys.waiters(NS, queue, job_id)) or 0) < count:
        assert time.monotonic() < deadline, "the waiters never counted themselves"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("keep_s", [30, 0])
async def test_result_waiters_answer_promptly_at_the_end(engine: Engine, keep_s: int) -> None:
    """With keep 0 too: a waiter present at the end gets it, though no record stays."""
    job_id = await reserved(engine, NewJob(b"w", keep_s=keep_s))
    waits = [asyncio.create_task(engine.result(NS, Q, job_id, 10_000)) for _ in range(3)]
    await waiters_present(engine, job_id, 3)
    assert not any(wait.done() for wait in waits)
    ended_at = time.monotonic()
    await engine.complete(NS, Q, job_id, b"done")
    answers = await asyncio.gather(*waits)
    assert time.monotonic() - ended_at < 0.5  # bounded: the figure is the benchmark's
    for ended, info in answers:
        assert (ended, info.state, info.result, info.job.body) == (True, "completed", b"done", b"w")


async def test_an_end_told_while_the_waiters_read_was_on_its_way_is_answered(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter's read finds the job reserved, then its end is told before the read's answer is
    looked at (two connections: either may come first): the waiter answers the end it was told."""
    job_id = await reserved(engine, NewJob(b"w", keep_s=0))
    read_state = engine._job_state
    reads = 0

    async def read_then_end(ns: str, queue: str, read_id: str):  # type: ignore[no-untyped-def]
        nonlocal reads
        found = await read_state(ns, queue, read_id)
        reads += 1
        if reads == 2:  # the wait's first read (after peek_job's): reserved; the end comes before it is looked at
            await engine.complete(NS, Q, job_id, b"done")
            await asyncio.sleep(0.3)  # the end watch reads the message and settles the waiter
        return found

    monkeypatch.setattr(engine, "_job_state", read_then_end)
    ended, info = await asyncio.wait_for(engine.result(NS, Q, job_id, 10_000), 5)
    assert (ended, info.state, info.result) == (True, "completed", b"done")


async def test_a_waiter_learns_of_a_destroy_with_no_keep(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"w"))).job_id
    waiting = asyncio.create_task(engine.result(NS, Q, job_id, 10_000))
    await waiters_present(engine, job_id, 1)
    assert await engine.destroy(NS, Q) == 1
    ended, info = await asyncio.wait_for(waiting, 0.5)
    assert (ended, info.state, info.job.body) == (True, "deleted", b"w")
    with pytest.raises(NotFound):  # no keep: nothing stays
        await engine.peek_job(NS, Q, job_id)
    assert await engine.redis.exists(keys.waiters(NS, Q, job_id)) == 0  # the waiter left its count


async def test_a_waiter_learns_of_a_death(engine: Engine, pump: Pump) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"w", tries=1))).job_id
    waiting = asyncio.create_task(engine.result(NS, Q, job_id, 10_000))
    await engine.consume(NS, [Q], ttr_ms=200, timeout_ms=0, count=1)
    ended, info = await asyncio.wait_for(waiting, 5)
    assert (ended, info.state, info.last_error) == (True, "dead", "ttr passed with no tries left")


async def test_stop_waiting_answers_waiters_at_once(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"w"))).job_id
    waiting = asyncio.create_task(engine.result(NS, Q, job_id, 30_000))
    await waiters_present(engine, job_id, 1)
    await engine.stop_waiting()
    ended, info = await asyncio.wait_for(waiting, 1)
    assert (ended, info.state) == (False, "ready")
    assert await engine.result(NS, Q, job_id, 30_000) == (False, info)


async def completed_while_waited(engine: Engine, queue: str) -> float:
    """Seconds between a complete and its waiter's answer."""
    job_id = await reserved(engine, NewJob(b"w"), queue)
    waiting = asyncio.create_task(engine.result(NS, queue, job_id, 10_000))
    await waiters_present(engine, job_id, 1, queue)
    ended_at = time.monotonic()
    await engine.complete(NS, queue, job_id, b"r")
    ended, info = await asyncio.wait_for(waiting, 5)
    assert (ended, info.state, info.result) == (True, "completed", b"r")
    return time.monotonic() - ended_at


async def test_waiters_are_told_again_after_a_redis_restart(redis_server: RedisProcess, redis_url: str) -> None:
    engine = pools.engine("default", PoolConfig("default", url=redis_url))
    try:
        assert await completed_while_waited(engine, "before") < 0.5
        redis_server.stop()
        await asyncio.sleep(2)  # longer than redis-py's own retries: the reading Loop's backoff
        redis_server.start()
        await asyncio.sleep(1.5)  # the subscription is made again within the Loop's backoff
        assert await completed_while_waited(engine, "after") < 0.5  # told, not found by a waiter's re-read
    finally:
        await engine.close()


async def test_results_on_a_sentinel_pool(sentinel_config: PoolConfig) -> None:
    engine = pools.engine("default", sentinel_config)
    try:
        await engine.set_queue_settings(NS, Q, SettingsChange(30, None))
        assert await completed_while_waited(engine, Q) < 0.5
    finally:
        await engine.close()
