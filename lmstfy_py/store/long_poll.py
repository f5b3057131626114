"""The long-poll loop of a consume, written once: an Engine's (store/engine.py) and a migrating
pool's (store/migration.py) differ only in what they try and what they wait on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from lmstfy_py.store.wake import wait_unless
from lmstfy_py.types import Job


async def long_poll(
    attempt: Callable[[bool], Awaitable[list[Job]]],
    wait: Callable[[float], Coroutine[Any, Any, None]],
    timeout_ms: int,
    stopping: Callable[[], bool],
    interrupt: asyncio.Event | None,
) -> list[Job]:
    """`attempt(waited)` until it answers jobs, the time is up, the pool stops, or `interrupt` is set;
    between attempts, `wait(seconds left)` for a wake-up. `waited`: whether a wait came before."""
    deadline = time.monotonic() + timeout_ms / 1000
    waited = False
    while True:
        jobs = await attempt(waited)
        left = deadline - time.monotonic()
        if jobs or left <= 0 or stopping() or (interrupt and interrupt.is_set()):
            return jobs
        await wait_unless(interrupt, wait(left))
        waited = True
