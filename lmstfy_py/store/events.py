"""An Engine's event streams (a part of Engine, store/engine.py; SPEC 13 Events and Stream).

Every step that changes a job records its event itself (lua/_lib.lua's event) in its queue's log
ev/{ns}/q (keys.py), a Redis stream of the last N entries with ids "<n>-0", n counting the queue's
events from 1 (field eseq of the queue's settings hash). A cursor is those numbers: for one queue
"n", for several "n1.n2..." in the order of the queues' names (sorted, whatever order a request names them in,
so a client resuming with its list in another order resumes each queue where it was). Because the numbers are
consecutive, a stream resuming from a cursor knows exactly how many events were trimmed before
the first one kept (a Gap). Live events come from the namespace's shared tail (store/event_tail.py).

Jobs still in lmstfy's layout (a pool with a Layout, store/layout.py) record no events while
there: their steps (lua/lmstfy_pump, lmstfy_dead, lmstfy_drop) are lmstfy's; the consume that
moves a job into our layout records it as `reserved` (lmstfy_reserve.lua's reserve_element),
and from then on each change records its event as any other job's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from lmstfy_py.errors import Conflict, InvalidParameter
from lmstfy_py.store import keys
from lmstfy_py.store.engine_base import EngineBase, as_int
from lmstfy_py.store.event_tail import Entry, Subscription, entry_number
from lmstfy_py.types import Event, Gap

HISTORY_PAGE = 500  # entries one XRANGE of a replay reads
MOST_QUEUES = 16  # a merged stream's queues (SPEC 13)


def _starts(after: str | None, heads: list[int]) -> list[int | None]:
    """Where each queue's stream starts: the number of the last event not to send; None: from the
    first one kept, no gap ("0"). InvalidParameter when `after` is not a cursor of these queues."""
    if after is None:
        return list(heads)
    if after == "0":
        return [None] * len(heads)
    parts = after.split(".")
    if len(parts) != len(heads) or not all(part.isascii() and part.isdigit() and len(part) <= 19 for part in parts):
        raise InvalidParameter("invalid after")
    starts = [int(part) for part in parts]
    if any(start > head for start, head in zip(starts, heads, strict=True)):
        raise InvalidParameter("invalid after")
    return list(starts)


class _Positions:
    """Where a stream is in each of its queues, and what it sends next: an entry it already sent is
    dropped, one after a trimmed stretch is preceded by a Gap."""

    def __init__(self, queues: Sequence[str], starts: list[int | None]) -> None:
        self.at: dict[str, int | None] = dict(zip(queues, starts, strict=True))

    def cursor(self) -> str:
        return ".".join(str(at or 0) for at in self.at.values())

    def take(self, entry: Entry) -> list[Event | Gap]:
        queue, number, kind, data = entry
        at = self.at[queue]
        if at is not None and number <= at:
            return []
        out: list[Event | Gap] = []
        if at is not None and number > at + 1:
            out.append(Gap(queue, number - at - 1))
        self.at[queue] = number
        out.append(Event(self.cursor(), kind.decode(), data))
        return out


class EventOps(EngineBase):
    async def open_events(
        self, ns: str, queues: Sequence[str], after: str | None, idle_s: float = 15.0
    ) -> AsyncIterator[Event | Gap | None]:
        """The event stream of `queues` (store/jobstore.py): checked now, then read as iterated."""
        names = tuple(queues)
        if not 0 < len(names) <= MOST_QUEUES or len(set(names)) != len(names):  # the web layer checks it first
            raise InvalidParameter("invalid queues")
        async with self.event_tail.opening_reads:
            heads = await self._event_heads(ns, names)
        if any(most <= 0 for most, _ in heads):
            raise Conflict("events are off for this queue")
        numbers = [number for _, number in heads]
        head_of = dict(zip(names, numbers, strict=True))
        in_cursor = sorted(names)  # the cursor's order (the module's docstring)
        positions = _Positions(in_cursor, _starts(after, [head_of[queue] for queue in in_cursor]))
        # Joined before the history is read: an event between the two is in one or the other (or both).
        subscription = self.event_tail.subscribe(ns, names, numbers)
        # A stream from now reads no history where the tail reads every event after its head.
        starts = {queue: head for queue, head in zip(names, numbers, strict=True) if queue in subscription.covered}
        return self._stream(subscription, positions, idle_s, starts)

    async def _event_heads(self, ns: str, queues: tuple[str, ...]) -> list[tuple[int, int]]:
        """Each queue's (events setting, number of its last event)."""
        pipe = self.redis.pipeline(transaction=False)
        for queue in queues:
            pipe.hmget(keys.settings(ns, queue), ["events", "eseq"])
        found = await pipe.execute()
        return [(as_int(most) or 0, as_int(number) or 0) for most, number in found]

    async def _stream(
        self, subscription: Subscription, positions: _Positions, idle_s: float, live_from: dict[str, int]
    ) -> AsyncIterator[Event | Gap | None]:
        try:
            if self.event_tail.closed:  # the pool stops: the stream ends at once
                return
            for queue in subscription.queues:
                start = positions.at[queue]
                if start is not None and live_from.get(queue) == start:
                    continue
                async for entry in self._history(subscription.ns, queue, start):
                    for item in positions.take(entry):
                        yield item
            while True:
                if subscription.behind:  # the tail left entries out: they are in the logs (or trimmed: a gap)
                    subscription.behind = False
                    async for item in self._catch_up(subscription, positions):
                        yield item
                try:
                    live = await asyncio.wait_for(subscription.entries.get(), idle_s)
                except TimeoutError:
                    yield None
                    continue
                if live is None:
                    return
                for item in positions.take(live):
                    yield item
        finally:
            self.event_tail.unsubscribe(subscription)

    async def _catch_up(self, subscription: Subscription, positions: _Positions) -> AsyncIterator[Event | Gap]:
        """What the logs hold after the stream's positions, the entries waiting included (read again)."""
        while not subscription.entries.empty():
            if subscription.entries.get_nowait() is None:  # closed: ends after this catch-up
                subscription.closed()
                break
        for queue in subscription.queues:
            async for entry in self._history(subscription.ns, queue, positions.at[queue]):
                for item in positions.take(entry):
                    yield item

    async def _history(self, ns: str, queue: str, start: int | None) -> AsyncIterator[Entry]:
        """The kept entries of a queue's log after `start` (None: all), as they are now."""
        low = "-" if start is None else f"({start}-0"
        while True:
            key = keys.events(ns, queue)
            async with self.event_tail.opening_reads:
                page: list[Any] = await self.redis.execute_command("XRANGE", key, low, "+", "COUNT", HISTORY_PAGE)
            for entry_id, fields in page:
                yield queue, entry_number(entry_id), fields[b"k"], fields[b"e"]
            if len(page) < HISTORY_PAGE:
                return
            low = f"({entry_number(page[-1][0])}-0"
