"""asyncio helpers: stopping background loops (pump, limit refresh, metrics collector) reliably,
and sharing one call among concurrent callers (token lookups, Redis connects)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from redis.exceptions import RedisError

STOP_GRACE_S = 2.0
T = TypeVar("T")


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
        task.cancel()
        await asyncio.wait([task], timeout=grace_s)


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
