"""Long-poll wake-ups: one BRPOP per set of wake lists, shared by every waiting request.

A BRPOP holds a Redis connection for its whole wait, so one BRPOP per waiting request
would need as many connections as there are long-polls. Instead, the requests of this
process that wait on the same wake lists share one BRPOP loop; each wake token it pops
wakes the longest-waiting request, which then runs reserve. A request that takes a job
and leaves more behind puts a token back (reserve.lua), which wakes the next request, so
a burst of jobs wakes as many waiters as it needs. A token popped when no request waits
any more is pushed back, so a waiter in another process still gets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any

from redis.exceptions import RedisError

log = logging.getLogger(__name__)

SLICE_S = 5.0  # one BRPOP's longest wait; the loop ends soon after its last waiter leaves
OUTAGE_PAUSE_S = 0.2  # after a Redis error, before the loop tries again


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _WakeSet:
    """The waiters on one set of wake lists and the BRPOP loop serving them."""

    def __init__(self, hub: WakeHub, wake_keys: tuple[str, ...]) -> None:
        self.hub = hub
        self.wake_keys = wake_keys
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.task: asyncio.Task[None] | None = None

    def pending(self) -> bool:
        while self.waiters and self.waiters[0].done():
            self.waiters.popleft()
        return bool(self.waiters)

    def wake_one(self) -> bool:
        if not self.pending():
            return False
        _settle(self.waiters.popleft())
        return True

    def wake_all(self) -> None:
        while self.waiters:
            _settle(self.waiters.popleft())

    async def run(self) -> None:
        try:
            while self.pending() and not self.hub.closed:
                await self._pop_once()
        finally:
            self.hub.forget(self)

    async def _pop_once(self) -> None:
        try:
            popped = await self.hub.blocking.brpop(list(self.wake_keys), timeout=SLICE_S)
        except (RedisError, OSError) as exc:
            # Each waiter re-runs reserve, which reports the outage to its own client.
            log.debug("wake loop on %s: %s", self.wake_keys, exc)
            self.wake_all()
            await asyncio.sleep(OUTAGE_PAUSE_S)
            return
        if popped and not self.wake_one():
            await self.hub.blocking.lpush(popped[0], popped[1])


class WakeHub:
    def __init__(self, blocking_client: Any) -> None:
        self.blocking = blocking_client
        self.closed = False
        self._sets: dict[tuple[str, ...], _WakeSet] = {}

    async def wait(self, wake_keys: Sequence[str], seconds: float) -> None:
        """Returns when a token arrives on one of the lists, after `seconds`, or when the hub closes."""
        if self.closed or seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        wake_set = self._join(tuple(sorted(wake_keys)), waiter)
        timer = loop.call_later(seconds, _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in wake_set.waiters:
                wake_set.waiters.remove(waiter)

    def _join(self, wake_keys: tuple[str, ...], waiter: asyncio.Future[None]) -> _WakeSet:
        wake_set = self._sets.get(wake_keys)
        if wake_set is None:
            wake_set = self._sets[wake_keys] = _WakeSet(self, wake_keys)
        wake_set.waiters.append(waiter)
        if wake_set.task is None or wake_set.task.done():
            wake_set.task = asyncio.create_task(wake_set.run(), name=f"wake {','.join(wake_keys)}")
        return wake_set

    def forget(self, wake_set: _WakeSet) -> None:
        if self._sets.get(wake_set.wake_keys) is wake_set and not wake_set.pending():
            del self._sets[wake_set.wake_keys]

    def waiting(self) -> int:
        return sum(len(s.waiters) for s in self._sets.values())

    async def close(self) -> None:
        """Wakes every waiter now (their long-polls answer "no job available") and ends the loops."""
        self.closed = True
        tasks = [s.task for s in self._sets.values() if s.task is not None]
        for wake_set in self._sets.values():
            wake_set.wake_all()
        # The loops notice `closed` after their current BRPOP (at most SLICE_S); waiters do not wait for that.
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
