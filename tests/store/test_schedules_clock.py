"""Recurring jobs on a fixed clock (SPEC section 9): a real Redis (standalone and clusters), the real
scheduler, and a clock the test sets. DST changes neither skip nor double a daily job; ticks missed
while no scheduler ran give one catch-up job, or none; a late tick is still fired; two schedulers
firing the same ticks give one job per tick.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from zoneinfo import ZoneInfo

import pytest

from lmstfy_py import ids
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.schedules import Catchup, Schedule
from lmstfy_py.store import schedule_ops
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.scheduler import Scheduler

NS, QUEUE = "clock", "q"
NEW_YORK = ZoneInfo("America/New_York")


class Clock:
    def __init__(self, at: dt.datetime) -> None:
        self.ms = _ms(at)

    def __call__(self) -> int:
        return self.ms

    def set(self, at: dt.datetime | int) -> None:
        self.ms = at if isinstance(at, int) else _ms(at)


def _ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)


def new_york(*fields: int, fold: int = 0) -> dt.datetime:
    return dt.datetime(*fields, tzinfo=NEW_YORK, fold=fold)  # type: ignore[misc]


@pytest.fixture
async def engine(pool_config: PoolConfig) -> AsyncIterator[Engine]:
    runtime = await Runtime.start(Config(pools={"default": pool_config}), run_pumps=False)
    try:
        engine = runtime.pools.own("default")
        await engine.purge_namespace(NS)
        yield engine
    finally:
        await runtime.stop()


def schedule(cron: str | None = None, every_s: int | None = None, catchup: Catchup = "one") -> Schedule:
    return Schedule("s", QUEUE, cron, every_s, "America/New_York", b"x", 3_600_000, 1, 0, catchup)


async def register(engine: Engine, clock: Clock, plan: Schedule) -> int:
    _, first = await schedule_ops.put(engine, NS, plan, clock())
    return first


async def fired_at(engine: Engine, scheduler: Scheduler, clock: Clock, at: dt.datetime | int) -> int:
    """Sets the clock, runs one scheduler step; returns how many jobs it published."""
    before = await engine.size(NS, QUEUE)
    clock.set(at)
    await scheduler.tick()
    return await engine.size(NS, QUEUE) - before


async def next_tick(engine: Engine) -> int:
    return (await engine.schedule(NS, QUEUE, "s")).next_ms


async def test_a_daily_job_in_the_skipped_hour_runs_once_right_after_the_gap(engine: Engine) -> None:
    """2027-03-14: clocks in New York jump from 02:00 to 03:00; a job at 02:30 runs at 03:00."""
    clock = Clock(new_york(2027, 3, 13, 12, 0))
    scheduler = Scheduler(engine, clock)
    assert await register(engine, clock, schedule("30 2 * * *")) == _ms(new_york(2027, 3, 14, 3, 0))
    assert await fired_at(engine, scheduler, clock, new_york(2027, 3, 14, 1, 59, 59)) == 0
    assert await fired_at(engine, scheduler, clock, new_york(2027, 3, 14, 3, 0)) == 1
    assert await fired_at(engine, scheduler, clock, new_york(2027, 3, 14, 3, 30)) == 0
    assert await next_tick(engine) == _ms(new_york(2027, 3, 15, 2, 30))
    assert await fired_at(engine, scheduler, clock, new_york(2027, 3, 15, 2, 30)) == 1


async def test_a_daily_job_in_the_repeated_hour_runs_once(engine: Engine) -> None:
    """2027-11-07: clocks in New York go back from 02:00 EDT to 01:00 EST; 01:30 comes twice."""
    clock = Clock(new_york(2027, 11, 6, 12, 0))
    scheduler = Scheduler(engine, clock)
    await register(engine, clock, schedule("30 1 * * *"))
    assert await fired_at(engine, scheduler, clock, new_york(2027, 11, 7, 1, 30)) == 1  # EDT
    assert await fired_at(engine, scheduler, clock, new_york(2027, 11, 7, 1, 30, fold=1)) == 0  # EST
    assert await next_tick(engine) == _ms(new_york(2027, 11, 8, 1, 30))
    assert await fired_at(engine, scheduler, clock, new_york(2027, 11, 8, 1, 30)) == 1


async def test_a_half_hourly_job_runs_in_both_repeated_hours(engine: Engine) -> None:
    """Debian cron's rule, which cronsim follows: a job with a wildcard hour is not a daily job."""
    clock = Clock(new_york(2027, 11, 7, 0, 50))
    scheduler = Scheduler(engine, clock)
    await register(engine, clock, schedule("*/30 * * * *"))
    fired = 0
    for at in (
        new_york(2027, 11, 7, 1, 0),
        new_york(2027, 11, 7, 1, 30),
        new_york(2027, 11, 7, 1, 0, fold=1),
        new_york(2027, 11, 7, 1, 30, fold=1),
        new_york(2027, 11, 7, 2, 0),
    ):
        fired += await fired_at(engine, scheduler, clock, at)
    assert fired == 5  # 5 half hours really passed


@pytest.mark.parametrize(("catchup", "expected"), [("one", 1), ("none", 0)])
async def test_ticks_missed_while_no_scheduler_ran_give_one_job_or_none(
    engine: Engine, catchup: Catchup, expected: int
) -> None:
    clock = Clock(new_york(2027, 5, 1, 9, 0))
    scheduler = Scheduler(engine, clock)
    first = await register(engine, clock, schedule(every_s=60, catchup=catchup))
    down_until = first + 10 * 60_000 + 30_000  # ten ticks missed, the last 30 s ago
    assert await fired_at(engine, scheduler, clock, down_until) == expected
    assert await next_tick(engine) == first + 11 * 60_000  # on the schedule's phase, after now
    assert await fired_at(engine, scheduler, clock, down_until + 1000) == 0
    assert await fired_at(engine, scheduler, clock, first + 11 * 60_000) == 1


async def test_a_tick_a_little_late_is_still_fired_and_the_next_keeps_its_time(engine: Engine) -> None:
    clock = Clock(new_york(2027, 5, 1, 9, 0))
    scheduler = Scheduler(engine, clock)
    first = await register(engine, clock, schedule(every_s=60, catchup="none"))
    assert await fired_at(engine, scheduler, clock, first + 4000) == 1  # within the 5 s grace
    assert await next_tick(engine) == first + 60_000
    daily = Schedule("d", QUEUE, "0 9 * * *", None, "America/New_York", b"x", 0, 1, 0, "none")
    await schedule_ops.put(engine, NS, daily, _ms(new_york(2027, 5, 1, 8, 0)))
    late = _ms(new_york(2027, 5, 1, 9, 0)) + 50_000  # a daily job 50 s late: a deploy, not a miss
    assert await fired_at(engine, scheduler, clock, late) == 1


async def test_two_schedulers_firing_the_same_ticks_give_one_job_per_tick(engine: Engine) -> None:
    clock = Clock(new_york(2027, 5, 1, 9, 0))
    one, other = Scheduler(engine, clock), Scheduler(engine, clock)
    first = await register(engine, clock, schedule(every_s=1))
    for tick in range(20):
        clock.set(first + tick * 1000)
        await one.tick()
        await other.tick()
    jobs = await engine.consume(NS, [QUEUE], 60_000, 0, 100)
    assert sorted(ids.timestamp_ms(job.job_id) for job in jobs) == [first + tick * 1000 for tick in range(20)]


async def test_a_deleted_schedule_fires_no_more(engine: Engine) -> None:
    clock = Clock(new_york(2027, 5, 1, 9, 0))
    scheduler = Scheduler(engine, clock)
    first = await register(engine, clock, schedule(every_s=60))
    await engine.delete_schedule(NS, QUEUE, "s")
    assert await fired_at(engine, scheduler, clock, first) == 0
    assert await engine.schedules(NS) == []
