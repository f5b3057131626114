"""Flow control (SPEC 14) in the engine, against real Redis (standalone and clusters): the new
queue settings, max_reserved and rate decided inside the reserve step, and the wake-ups that
end a held long-poll without polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import astuple

from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import DueBuckets, Job, NewJob, QueueSettings, SettingsChange

NS, Q = "ns1", "q1"


async def publish(engine: Engine, n: int, queue: str = Q) -> list[str]:
    return [(await engine.publish(NS, queue, NewJob(str(i).encode()))).job_id for i in range(n)]


async def take(engine: Engine, count: int, timeout_ms: int = 0, ttr_ms: int = 60_000) -> list[Job]:
    return await engine.consume(NS, [Q], ttr_ms=ttr_ms, timeout_ms=timeout_ms, count=count)


async def woken_by(engine: Engine, step: Callable[[], Awaitable[object]] | None = None, wait_ms: int = 4000) -> float:
    """Seconds until a long-poll held back gets a job, once `step` ran (the wait's own re-check is 5 s away)."""
    started = time.monotonic()
    waiting = asyncio.create_task(take(engine, 1, timeout_ms=wait_ms))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    if step is not None:
        started = time.monotonic()
        await step()
    assert len(await waiting) == 1
    return time.monotonic() - started


async def test_settings_round_trip_with_the_flow_control_names(engine: Engine) -> None:
    change = SettingsChange(max_reserved=4_294_967_295, rate="0.5", burst=3, group_concurrency=7)
    expected = QueueSettings(0, 0, 4_294_967_295, 0.5, 3, 7)
    assert await engine.set_queue_settings(NS, Q, change) == expected
    assert await engine.queue_settings(NS, Q) == expected
    unset = await engine.set_queue_settings(NS, Q, SettingsChange(burst=0, keep_s=5))
    assert unset == QueueSettings(5, 0, 4_294_967_295, 0.5, None, 7)
    off = await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=0, rate="0"))
    assert off == QueueSettings(5, 0, 0, 0.0, None, 7)


async def test_max_reserved_gives_the_free_slots_and_a_freed_slot_wakes_a_held_consume(
    engine: Engine, pump: Pump
) -> None:
    ids = await publish(engine, 6)
    await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=2))
    first = await take(engine, 5)
    assert [j.job_id for j in first] == ids[:2]
    assert await take(engine, 1) == []
    assert await woken_by(engine, lambda: engine.ack(NS, Q, first[0].job_id)) < 1
    assert (
        await woken_by(engine, lambda: engine.release(NS, Q, first[1].job_id, 0, "again")) < 1
    )  # the released job itself, at the front of the list
    await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=1))  # lowering takes nothing back
    assert (await engine.stats(NS, Q)).reserved == 2
    assert await take(engine, 1) == []
    # Raising the limit wakes a held consume at once.
    assert await woken_by(engine, lambda: engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=3))) < 1


async def test_a_ttr_passed_frees_the_slot_and_wakes(engine: Engine, pump: Pump) -> None:
    await publish(engine, 2)
    await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=1))
    assert len(await take(engine, 2, ttr_ms=300)) == 1
    assert 0.1 < await woken_by(engine) < 1.2


async def test_rate_gives_the_burst_then_a_token_at_a_time_and_wakes_when_one_is_there(
    engine: Engine, pump: Pump
) -> None:
    await publish(engine, 20)
    await engine.set_queue_settings(NS, Q, SettingsChange(rate="4", burst=3))
    assert len(await take(engine, 10)) == 3  # full when set: the burst
    assert await take(engine, 10) == []
    assert await woken_by(engine) < 0.5  # the next token in 250 ms, told by the pump's wake-up member
    await asyncio.sleep(0.55)
    assert len(await take(engine, 10)) == 2  # the whole tokens there, no more
    await engine.set_queue_settings(NS, Q, SettingsChange(rate="0"))
    assert len(await take(engine, 20)) == 20 - 6


async def test_stats_tell_since_when_the_oldest_ready_job_waits_and_the_due_buckets(engine: Engine) -> None:
    assert (await engine.stats(NS, Q)).oldest_ready_ms is None
    before = now_ms()
    await engine.publish(NS, Q, NewJob(b"p", priority=3, tries=3))
    published = (await engine.stats(NS, Q)).oldest_ready_ms
    assert published is not None and before <= published <= now_ms()
    due = (await engine.publish(NS, Q, NewJob(b"due", delay_ms=2 * 3_600_000))).job_id
    for delay_ms in (30_000, 1_800_000, 5 * 3_600_000, 3 * 86_400_000):
        await engine.publish(NS, Q, NewJob(b"d", delay_ms=delay_ms))
    await engine.publish(NS, Q, NewJob(b"x", tries=3))
    [held] = await take(engine, 1)  # the priority job: what is ready now is "x", published after it
    assert held.body == b"p"
    assert (await engine.stats(NS, Q)).oldest_ready_ms >= published  # type: ignore[operator]
    await engine.release(NS, Q, held.job_id, 90_000, "later")  # a release delay counts as delayed
    stats = await engine.stats(NS, Q)
    assert (stats.delayed, stats.due) == (6, DueBuckets(within_1m=1, within_1h=2, within_1d=2, later=1))
    [x] = await take(engine, 1)
    promoted = now_ms()
    await engine.promote(NS, Q, due)  # ready since now, as if it came due
    came_due = (await engine.stats(NS, Q)).oldest_ready_ms
    assert came_due is not None and promoted <= came_due <= now_ms()
    await engine.release(NS, Q, x.job_id, 0, "again")  # ready again now: "due" is still the oldest
    stats = await engine.stats(NS, Q)
    assert (stats.oldest_ready_ms, stats.ready, stats.delayed, sum(astuple(stats.due))) == (came_due, 2, 5, 5)


async def test_a_reserved_job_whose_ttl_ends_before_its_ttr_frees_its_slot_then(engine: Engine, pump: Pump) -> None:
    # Its hash vanishes at its ttl (no keep, no group): the reservation must not hold the queue's
    # one slot until the ttr an hour later, ACKed or not.
    await engine.set_queue_settings(NS, Q, SettingsChange(max_reserved=1))
    await engine.publish(NS, Q, NewJob(b"short", ttl_ms=300))
    await engine.publish(NS, Q, NewJob(b"next"))
    [short] = await engine.consume(NS, [Q], ttr_ms=3_600_000, timeout_ms=0, count=1)
    assert short.body == b"short"
    assert await engine.consume(NS, [Q], ttr_ms=3_600_000, timeout_ms=0, count=1) == []  # the slot is taken
    [after] = await engine.consume(NS, [Q], ttr_ms=3_600_000, timeout_ms=5_000, count=1)  # woken as it frees
    assert after.body == b"next"
    assert (await engine.stats(NS, Q)).reserved == 1
    # A touch extends a reservation up to the job's end, not past it.
    await engine.publish(NS, "other", NewJob(b"touched", ttl_ms=300))
    [touched] = await engine.consume(NS, ["other"], ttr_ms=100, timeout_ms=0, count=1)
    # Its end, not the hour's ttr: the hash's expiry + 1 ms (reservation_end: gone by then), in
    # whole ms, read as TIME + PTTL (PTTL counts from the step's start: a moment more, if Redis's
    # clock lags); publish, consume and touch may all fall within one millisecond (a CI run saw 301).
    assert await engine.touch(NS, "other", touched.job_id, 3_600_000) <= now_ms() + 300 + 50
    await asyncio.sleep(0.6)
    assert (await engine.stats(NS, "other")).reserved == 0
