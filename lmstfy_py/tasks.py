"""asyncio helpers: background loops that never die silently (`Loop`), the parts that run them
(`Background`, `OneLoop`), stopping tasks reliably, and sharing one call among concurrent callers
(token lookups, Redis connects)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Self, TypeVar

from redis.exceptions import RedisError

from lmstfy_py.store.faults import outage_reason

log = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
CANCEL_TRIES = 3
MIN_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0  # after an outage: a loop notices that Redis is back within this
MAX_CRASH_BACKOFF_S = 5.0  # after a bug: its traceback is logged at most about this often
T = TypeVar("T")

Step = Callable[[], Awaitable[float | None]]


class Loop:
    """A background loop that never dies silently: `step` runs again and again until `stop()`.

    Every background task of the server (timer pumps, health checks, the long-poll wake loops,
    the limit table refresh, the metrics collector) is one. `step` returns how many seconds to
    sleep before it runs again (0: at once; None: the loop is done). A step that fails with a
    storage outage (store/faults.py: Redis unreachable, timing out or refusing) is retried after
    a backoff doubling from MIN_BACKOFF_S to MAX_BACKOFF_S, with no log line above DEBUG: the
    pool's health check says when Redis goes away and comes back. Any other exception is a bug:
    its traceback is logged, `lmstfy_background_restarts_total{loop=kind}` counts it, and the
    step is retried after a backoff up to MAX_CRASH_BACKOFF_S. `wake()` ends the current sleep
    at once, or, called while a step runs, makes the next sleep not happen.
    """

    def __init__(self, kind: str, step: Step, detail: str = "") -> None:
        self.kind = kind  # the metric label: a fixed word, never a name a client chose
        self.name = f"{kind} {detail}".strip()
        self._step = step
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._running = True
        self._task = asyncio.create_task(self._run(), name=self.name)

    def wake(self) -> None:
        if self._waiter is None:
            self._woken = True
        elif not self._waiter.done():
            self._waiter.set_result(None)

    async def stop(self) -> None:
        """Lets the current step finish (bounded, see `finish`) and ends the loop."""
        self._running = False
        self.wake()
        await finish(self._task)
        self._task = None

    async def cancel(self, grace_s: float = 1.0) -> None:
        """Ends the loop now, cancelling the current step: for a step that only waits (a BRPOP)."""
        self._running = False
        task, self._task = self._task, None
        await cancel_until_done(task, grace_s)

    async def _run(self) -> None:
        failures = 0
        while self._running:
            try:
                pause = await self._step()
            except Exception as exc:
                failures += 1
                pause = self._failed(exc, failures)
            else:
                failures = 0
                if pause is None:
                    return
            await self._sleep(pause)

    def _failed(self, exc: Exception, failures: int) -> float:
        """Logs a failed step as it deserves; how long to wait before the next."""
        if outage_reason(exc) is not None:
            # Expected now and then, and reported once per pool and change by its health check.
            log.debug("%s: %r; retrying", self.name, exc)
            return _backoff(failures, MAX_BACKOFF_S)
        pause = _backoff(failures, MAX_CRASH_BACKOFF_S)
        log.error("%s crashed; restarting it in %.2f s", self.name, pause, exc_info=exc)
        _count_restart(self.kind)
        return pause

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._woken or not self._running:
            self._woken = False
            return
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        timer = loop.call_later(seconds, _settle, self._waiter)
        try:
            await self._waiter
        finally:
            timer.cancel()
            self._waiter = None


class Background:
    """A part of the server that runs Loops of its own between `start` and `stop`.

    As an async context manager, entering starts it and leaving stops it: Runtime (runtime.py)
    enters every part on one AsyncExitStack, so they stop in the reverse order of their start.
    """

    def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class OneLoop(Background):
    """A Background whose one Loop is `self.loop`, set by the subclass's __init__."""

    loop: Loop

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()


def _backoff(failures: int, cap: float) -> float:
    doubled: float = MIN_BACKOFF_S * 2.0 ** min(failures - 1, 30)
    return min(cap, doubled)


def _count_restart(kind: str) -> None:
    # Imported here: the metrics package imports the store, whose modules run Loops.
    from lmstfy_py.metrics.families import LOOP_RESTARTS
    from lmstfy_py.metrics.multiproc import directory

    try:
        directory()  # before the child: one made first would write where no scrape reads
        LOOP_RESTARTS.labels(kind).inc()
    except Exception:  # a full disk under the metrics directory must not end the loop it counts
        log.exception("cannot count the restart of %s", kind)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def finish(task: asyncio.Task[Any] | None, grace_s: float = STOP_GRACE_S) -> None:
    """Waits for a loop that was already told to stop (a flag or an event); cancels it as a last resort.

    Told, not just cancelled: on Python < 3.12 asyncio.wait_for, which redis-py 8 wraps every
    command in, can swallow a CancelledError (CPython gh-86296) and leave a cancelled loop
    running for ever. Every wait here is bounded.
    """
    if task is None:
        return
    done, _ = await asyncio.wait([task], timeout=grace_s)
    if not done:
        await cancel_until_done(task, grace_s)


async def cancel_until_done(task: asyncio.Task[Any] | None, grace_s: float, tries: int = CANCEL_TRIES) -> None:
    """Cancels `task` and waits `grace_s` for it to end, up to `tries` times.

    Again, because one cancel can be lost on the way: on Python < 3.12 asyncio.wait_for and
    asyncio.timeout can turn it into a TimeoutError (CPython gh-86296), which redis-py retries as
    a network error. A loop that runs on that way past its owner's close reopens the clients closed
    after it, and their connections leak. Not sooner than `grace_s`: a cancel that arrived is let
    finish its clean-up (redis-py closes the connection it interrupted).
    """
    if task is None:
        return
    for _ in range(tries):
        if task.done():
            return
        task.cancel()
        await asyncio.wait([task], timeout=grace_s)
    if not task.done():
        log.warning("%s did not end when cancelled %d times", task.get_name(), tries)


async def shared(flights: dict[Hashable, asyncio.Future[T]], key: Hashable, start: Callable[[], Awaitable[T]]) -> T:
    """The outcome of the call of `start` in flight under `key`, started if there is none.

    Concurrent callers share one call and its outcome, failures included: a burst of requests
    makes one Redis lookup, and when Redis does not answer, one connect attempt times out for
    all of them rather than each in turn. A caller that is cancelled does not cancel the call.
    Each failing caller raises its own copy of a Redis error: one exception raised in many tasks
    would pile up all their tracebacks.
    """
    flight = flights.get(key)
    if flight is None:
        flight = flights[key] = asyncio.ensure_future(start())
        flight.add_done_callback(functools.partial(_landed, flights, key))
    try:
        return await asyncio.shield(flight)
    except RedisError as exc:
        raise type(exc)(*exc.args) from None


def _landed(flights: dict[Hashable, asyncio.Future[Any]], key: Hashable, flight: asyncio.Future[Any]) -> None:
    if flights.get(key) is flight:
        del flights[key]
    if not flight.cancelled():
        flight.exception()  # retrieved even if every caller had left: no "never retrieved" log
