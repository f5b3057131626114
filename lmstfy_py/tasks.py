"""Stopping background loops (pump, limit refresh, metrics collector) reliably."""

from __future__ import annotations

import asyncio
from typing import Any

STOP_GRACE_S = 2.0


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
