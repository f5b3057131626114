"""Background loops never die silently (tasks.Loop): a crash is logged with its traceback, counted,
and the loop goes on after a backoff; an outage is retried quietly; every loop of the server is one.

Failures are injected by making one call of a real loop's step raise; everything else (Redis,
the engine, the timer pump) is real.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

import tests.conftest
from lmstfy_py import metrics, tasks
from lmstfy_py.admin.limits import Limit, LimitStore
from lmstfy_py.runtime import Runtime
from lmstfy_py.types import NewJob
from tests.metrics.test_metrics import Scrape

RESTARTS = "lmstfy_background_restarts_total"
NS = "loops"


def restarts(kind: str) -> float:
    return Scrape(metrics.exposition().decode()).value(RESTARTS, loop=kind)


def fails_once(real: Callable[..., Awaitable[Any]], error: BaseException) -> Callable[..., Awaitable[Any]]:
    """`real`, except that its first call raises `error`."""
    calls = 0

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise error
        return await real(*args, **kwargs)

    return flaky


# Generous: these tests run beside others on two cores (not in the serial part); a loaded CI run
# once took more than 5 s to see the long-poll loop's restart. What they assert is that it comes.
async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    await tests.conftest.eventually(check, timeout)


def crash_records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR and r.getMessage().startswith(f"{name} crashed")]


# -- the helper itself ---------------------------------------------------------------------


async def test_a_crashing_step_is_logged_with_its_traceback_counted_and_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = 0

    async def step() -> float:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise ValueError(f"bug #{runs}")
        return 0.01

    before = restarts("demo")
    loop = tasks.Loop("demo", step, "one")
    loop.start()
    await eventually(lambda: runs >= 5)
    await loop.stop()
    crashes = crash_records(caplog, "demo one")
    assert len(crashes) == 2
    assert all(r.exc_info is not None and r.exc_info[0] is ValueError for r in crashes)
    assert restarts("demo") - before == 2
    assert not loop.running


async def test_an_outage_is_retried_with_a_backoff_and_no_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    runs = 0

    async def step() -> float:
        nonlocal runs
        runs += 1
        raise RedisConnectionError("Error 111 connecting")

    before = restarts("outage")
    loop = tasks.Loop("outage", step)
    loop.start()
    await asyncio.sleep(1.0)
    await loop.stop()
    # Backoff 50 ms doubling: 50+100+200+400 ms fit in a second; a loop without backoff would run thousands.
    assert 3 <= runs <= 8
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
    assert restarts("outage") == before


async def test_wake_ends_a_sleep_at_once_and_a_wake_during_a_step_skips_the_next_sleep() -> None:
    runs: list[float] = []
    stepping = asyncio.Event()
    go_on = asyncio.Event()

    async def step() -> float:
        runs.append(asyncio.get_running_loop().time())
        if len(runs) == 2:
            stepping.set()
            await go_on.wait()
        return 60.0

    loop = tasks.Loop("sleepy", step)
    loop.start()
    await eventually(lambda: len(runs) == 1)
    loop.wake()  # sleeping 60 s: woken now
    await asyncio.wait_for(stepping.wait(), 1.0)
    loop.wake()  # mid-step: its 60 s sleep must not happen
    go_on.set()
    await eventually(lambda: len(runs) == 3, timeout=1.0)
    await loop.stop()


async def test_a_step_returning_none_ends_the_loop() -> None:
    async def step() -> float | None:
        return None

    loop = tasks.Loop("once", step)
    loop.start()
    await eventually(lambda: not loop.running, timeout=1.0)


async def test_cancel_ends_a_step_that_lost_the_first_cancel() -> None:
    # As redis-py's retry does when Python 3.11's wait_for turns the cancel into a TimeoutError
    # (gh-86296): the step goes on with its command. Cancelled once, it would outlive the
    # engine's close and reopen the clients closed after it (a cluster client's connections leaked).
    steps: list[asyncio.Task[Any] | None] = []

    async def step() -> float:
        steps.append(asyncio.current_task())
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(60)  # "retried": the cancel is lost
        return 0.0

    loop = tasks.Loop("deaf", step)
    loop.start()
    await eventually(lambda: len(steps) == 1, timeout=1.0)
    await loop.cancel(grace_s=0.2)
    [task] = steps
    assert task is not None and task.done()


# -- the server's loops --------------------------------------------------------------------


async def test_the_timer_pump_survives_a_crash_and_still_moves_delayed_jobs(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    [pump] = runtime.pumps
    before = restarts("pump")
    pump.tick = fails_once(pump.tick, RuntimeError("injected"))  # type: ignore[method-assign]
    pump.loop.wake()
    engine = runtime.pools.get("default")
    await engine.publish(NS, "q", NewJob(b"later", delay_ms=200))
    jobs = await engine.consume(NS, ["q"], ttr_ms=60_000, timeout_ms=5000, count=1)
    assert [job.body for job in jobs] == [b"later"]
    assert len(crash_records(caplog, "pump default")) == 1
    assert restarts("pump") - before == 1


async def test_the_long_poll_wake_loop_survives_a_crash(runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    engine = runtime.pools.get("default")
    # The health check ends every waiting long-poll with 503 when a PING takes over a second
    # (health.py, by design): on a machine loaded by other work that ended this test's consume.
    # The test is about the wake loop, so its pool's health check is not running.
    for check in runtime.health:
        await check.stop()
    before = restarts("wake")
    engine.wake_hub.blocking.brpop = fails_once(engine.wake_hub.blocking.brpop, RuntimeError("injected"))
    waiting = asyncio.create_task(engine.consume(NS, ["idle"], ttr_ms=60_000, timeout_ms=5000, count=1))
    # At least one: the family counts every "wake" loop of the process, and one left running by an
    # earlier test in this process (the suite runs on two) may restart too. That this loop crashed
    # exactly once is its own log record, asserted below.
    await eventually(lambda: waiting.done() or restarts("wake") - before >= 1)
    assert not waiting.done(), waiting.result()  # a consume that ended (Redis timed out?) says why
    await asyncio.sleep(0.3)  # the restarted loop's BRPOP is waiting again
    await engine.publish(NS, "idle", NewJob(b"wanted"))
    jobs = await asyncio.wait_for(waiting, 3.0)
    assert [job.body for job in jobs] == [b"wanted"]
    assert len(crash_records(caplog, f"wake w/{{{NS}}}/idle")) == 1


async def test_the_limit_refresh_survives_a_crash(runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    limits = runtime.limits
    before = restarts("limits")
    limits.refresh = fails_once(limits.refresh, RuntimeError("injected"))  # type: ignore[method-assign]
    await eventually(lambda: restarts("limits") - before == 1)
    # A limit stored by another process (straight into Redis, as its admin API would) still arrives.
    other_process = LimitStore(limits.redis, limits.pools)
    await other_process.set("default", NS, "tok", Limit(1, 1, 10))
    await eventually(lambda: limits.table.get(("default", NS, "tok")) == Limit(1, 1, 10))
    assert len(crash_records(caplog, "limits")) == 1


async def test_the_metrics_collector_survives_a_crash(runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    collector = runtime.collector
    assert collector is not None
    before = restarts("collector")
    collector.refresh = fails_once(collector.refresh, RuntimeError("injected"))  # type: ignore[method-assign]
    collector._loop.wake()
    await eventually(lambda: restarts("collector") - before == 1)
    engine = runtime.pools.get("default")
    await engine.publish(NS, "sized", NewJob(b"x"))
    collector._loop.wake()
    queue_size = "infra_lmstfy_redis_queue_sizes"
    await eventually(
        lambda: (
            Scrape(metrics.exposition().decode()).value(queue_size, pool="default", namespace=NS, queue="sized") == 1
        )
    )
    assert len(crash_records(caplog, "collector")) == 1
