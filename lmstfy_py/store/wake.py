"""Long-poll wake-ups: one BRPOP per set of wake lists, shared by every waiting request.

A BRPOP holds a Redis connection for its whole wait, so one BRPOP per waiting request
would need as many connections as there are long-polls. Instead, the requests of this
process that wait on the same wake lists share one BRPOP loop; each wake token it pops
wakes the longest-waiting request, which then runs reserve. A request that takes a job
and leaves more behind puts a token back (reserve.lua), which wakes the next request, so
a burst of jobs wakes as many waiters as it needs. A token popped when no request waits
any more is pushed back, so a waiter in another process still gets it. A waiter claimed by a
step that is handing it jobs (store/handover.py) is passed over: woken, it would reserve jobs of
its own and the handed ones would go back. A token popped when every waiter is claimed is
pushed back too.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from lmstfy_py import tasks

SLICE_S = 5.0  # one BRPOP's wait; the loop ends soon after its last waiter leaves
MAX_SLICE_S = 30.0  # ... or longer, as long as its longest waiter asked for (a push group's)
# Every waiter claimed: the token goes back (another process may have a waiter for it) and the
# loop waits this long, or until a waiter joins, before its next BRPOP, rather than spin on it.
CLAIMED_PAUSE_S = 0.01


class Claimable(Protocol):
    """What a waiter may be claimed by (store/handover.py's Mailbox)."""

    claimed: bool


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _copy(error: BaseException) -> BaseException:
    # One exception object per waiter: raised in many tasks, a shared one would pile up their tracebacks.
    try:
        return type(error)(*error.args)
    except TypeError:
        return error


class _WakeSet:
    """The waiters on one set of wake lists and the BRPOP loop serving them while any waits."""

    def __init__(self, hub: WakeHub, wake_keys: tuple[str, ...]) -> None:
        self.hub = hub
        self.wake_keys = wake_keys
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.claimables: dict[asyncio.Future[None], Claimable] = {}  # of the waiters that have one
        self.slice_s = SLICE_S
        self.paused = False  # for claimed waiters (CLAIMED_PAUSE_S): a waiter joining ends the pause
        self.loop = tasks.Loop("wake", self._pop_once, ",".join(wake_keys))

    def pending(self) -> bool:
        while self.waiters and self.waiters[0].done():
            self.waiters.popleft()
        return bool(self.waiters)

    def wake_one(self) -> bool:
        """Wakes the longest-waiting waiter that is not claimed; False when there is none."""
        if not self.pending():
            return False
        for waiter in self.waiters:  # the first, unless it is claimed
            claimable = self.claimables.get(waiter)
            if not waiter.done() and (claimable is None or not claimable.claimed):
                self.waiters.remove(waiter)
                _settle(waiter)
                return True
        return False

    def wake_all(self) -> None:
        while self.waiters:
            _settle(self.waiters.popleft())

    def fail_all(self, error: BaseException) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(_copy(error))

    async def _pop_once(self) -> float | None:
        self.paused = False
        # No await between this check and the loop's end, so a waiter joining now finds the loop
        # either still running (it will be served) or ended (_join starts it again).
        if not self.pending() or self.hub.closed:
            self.hub.forget(self)
            return None
        try:
            popped = await self.hub.blocking.brpop(list(self.wake_keys), timeout=self.slice_s)
        except Exception:
            # Each waiter runs reserve again, which tells its own client what is wrong.
            self.wake_all()
            raise  # the Loop retries after a backoff
        if popped and not self.wake_one():
            await self.hub.blocking.lpush(popped[0], popped[1])
            if self.pending():  # every waiter claimed: their jobs are on their way
                self.paused = True
                return CLAIMED_PAUSE_S
        return 0


class WakeHub:
    def __init__(self, blocking_client: Any) -> None:
        self.blocking = blocking_client
        self.closed = False
        self._sets: dict[tuple[str, ...], _WakeSet] = {}

    async def wait(
        self,
        wake_keys: Sequence[str],
        seconds: float,
        waiter: asyncio.Future[None] | None = None,
        claimable: Claimable | None = None,
    ) -> None:
        """Returns when a token arrives on one of the lists, after `seconds`, or when the hub closes;
        or when `waiter`, if given, is settled by someone else (a step handing jobs over to
        `claimable`, passed over by tokens while it is claimed)."""
        if self.closed or seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter = waiter or loop.create_future()
        wake_set = self._join(tuple(sorted(wake_keys)), waiter)
        if claimable is not None:
            wake_set.claimables[waiter] = claimable
        # Fewer BRPOPs for long waits (a BRPOP in progress keeps its own timeout).
        wake_set.slice_s = max(wake_set.slice_s, min(seconds, MAX_SLICE_S))
        timer = loop.call_later(seconds, _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in wake_set.waiters:
                wake_set.waiters.remove(waiter)
            wake_set.claimables.pop(waiter, None)

    def _join(self, wake_keys: tuple[str, ...], waiter: asyncio.Future[None]) -> _WakeSet:
        wake_set = self._sets.get(wake_keys)
        if wake_set is None:
            wake_set = self._sets[wake_keys] = _WakeSet(self, wake_keys)
        wake_set.waiters.append(waiter)
        if not wake_set.loop.running:
            wake_set.loop.start()
        elif wake_set.paused:
            wake_set.loop.wake()
        return wake_set

    def forget(self, wake_set: _WakeSet) -> None:
        if self._sets.get(wake_set.wake_keys) is wake_set and not wake_set.pending():
            del self._sets[wake_set.wake_keys]

    def waiting(self) -> int:
        return sum(len(s.waiters) for s in self._sets.values())

    def fail_all(self, error: BaseException) -> None:
        """Ends every waiting long-poll with `error` (its own copy): Redis stopped answering, says the
        pool's health check, and a worker must hear 503 now, not "no job available" later."""
        for wake_set in self._sets.values():
            wake_set.fail_all(error)

    async def close(self) -> None:
        """Wakes every waiter now (their long-polls answer "no job available") and ends the loops."""
        self.closed = True
        loops = [wake_set.loop for wake_set in self._sets.values()]
        for wake_set in self._sets.values():
            wake_set.wake_all()
        # A BRPOP in flight may wait up to SLICE_S: cut it short, a wake token it took is not needed any more.
        await asyncio.gather(*(loop.cancel() for loop in loops))


async def wait_unless(interrupt: asyncio.Event | None, waiting: Coroutine[Any, Any, None]) -> None:
    """Awaits `waiting`, or less once `interrupt` is set (a wait on the hub is safe to cut short)."""
    if interrupt is None:
        await waiting
        return
    racing = [asyncio.ensure_future(waiting), asyncio.ensure_future(interrupt.wait())]
    try:
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in racing:
            task.cancel()
