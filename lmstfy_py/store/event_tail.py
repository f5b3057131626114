"""The live tail of the queues' event logs (SPEC 13 Stream): one reading loop per namespace of this
process and pool, feeding every event stream open on it (store/events.py).

An open stream does not read Redis for live events itself: 1,000 open streams would mean 1,000
blocking reads and connections. Instead the streams of a namespace share one Loop that XREADs
(BLOCK READ_MS) every log they watch from the last entry it read of each: all of a namespace's
keys share its hash tag, so in a Cluster that is one command to one node. A stream's own history
(what it replays from its cursor) it reads itself, after it joined, and it drops what it read
twice by the entries' numbers (their ids are "<n>-0", consecutive per queue; lua/_lib.lua).

After a failed read (a Redis restart, a failover) the Loop reads again after its backoff from
the same entries: nothing is lost unless trimmed meanwhile, which a stream then reports as a gap.
The Loop of a namespace ends with its last stream; close() ends every stream (stop_waiting).
"""

from __future__ import annotations

import asyncio
from typing import Any

from lmstfy_py import tasks
from lmstfy_py.store import keys

READ_MS = 200  # one XREAD's block: a queue first watched while a read waits is read from the next one
READ_COUNT = 1000  # entries one XREAD takes per log
# Reads an opening stream makes itself (its queues' heads, its history) at once in this process:
# 1,000 streams opening together must not ask for more connections than a pool lends.
OPENING_READS = 32
# Live entries a stream may have waiting (a slow reader): past it the tail stops handing it more,
# and the stream reads them back from the logs (store/events.py), so memory stays bounded.
MOST_BEHIND = 10_000

# (queue, entry number, kind, the JSON); None: the tail closed
Entry = tuple[str, int, bytes, bytes]


class Subscription:
    """What the tail gives one open stream: the live entries of its queues, in order per queue."""

    def __init__(self, ns: str, queues: tuple[str, ...]) -> None:
        self.ns = ns
        self.queues = queues
        self.entries: asyncio.Queue[Entry | None] = asyncio.Queue()
        # The queues whose every entry after the head given the tail will read: no history to read
        # for a stream that starts at that head.
        self.covered: set[str] = set()
        self.behind = False  # live entries were left out (MOST_BEHIND): read the logs again

    def give(self, entry: Entry) -> None:
        if self.entries.qsize() >= MOST_BEHIND:
            self.behind = True
        else:
            self.entries.put_nowait(entry)

    def closed(self) -> None:
        self.entries.put_nowait(None)


def entry_number(entry_id: Any) -> int:
    """The number n of an event's id "<n>-0"."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return int(text.partition("-")[0])


class _NamespaceTail:
    def __init__(self, hub: EventTail, ns: str) -> None:
        self.hub = hub
        self.ns = ns
        self.read_to: dict[str, int] = {}  # queue -> the number of the last entry read
        self.subscriptions: dict[str, set[Subscription]] = {}
        self.queue_of: dict[str, str] = {}  # log key -> queue
        self.loop = tasks.Loop("events", self._read_once, ns)

    def join(self, subscription: Subscription, heads: list[int]) -> set[str]:
        covered = set()
        for queue, head in zip(subscription.queues, heads, strict=True):
            if queue not in self.read_to:
                self.read_to[queue] = head
                self.queue_of[keys.events(self.ns, queue)] = queue
            if self.read_to[queue] <= head:
                covered.add(queue)
            self.subscriptions.setdefault(queue, set()).add(subscription)
        if not self.loop.running:
            self.loop.start()
        return covered

    def leave(self, subscription: Subscription) -> None:
        for queue in subscription.queues:
            left = self.subscriptions.get(queue)
            if left is None:
                continue
            left.discard(subscription)
            if not left:
                del self.subscriptions[queue], self.read_to[queue]
                del self.queue_of[keys.events(self.ns, queue)]

    async def _read_once(self) -> float | None:
        # No await between this check and the loop's end: a stream joining now finds the loop
        # either running (it will read its queues) or ended (join starts it again).
        if not self.subscriptions or self.hub.closed:
            self.hub.forget(self)
            return None
        streams = {keys.events(self.ns, queue): f"{at}-0" for queue, at in self.read_to.items()}
        reply = await self.hub.client.xread(streams, count=READ_COUNT, block=READ_MS)
        for key, entries in reply or ():
            queue = self.queue_of.get(key.decode() if isinstance(key, bytes) else key)
            if queue is None:  # its last stream left while this read waited
                continue
            for entry_id, fields in entries:
                number = entry_number(entry_id)
                self.read_to[queue] = number
                entry = (queue, number, fields[b"k"], fields[b"e"])
                for subscription in self.subscriptions.get(queue, ()):
                    subscription.give(entry)
        return 0


class EventTail:
    """The live tails of one pool in this process, one per namespace watched."""

    def __init__(self, blocking_client: Any) -> None:
        self.client = blocking_client  # each XREAD holds a connection for its block
        self.opening_reads = asyncio.Semaphore(OPENING_READS)
        self.closed = False
        self._tails: dict[str, _NamespaceTail] = {}

    def subscribe(self, ns: str, queues: tuple[str, ...], heads: list[int]) -> Subscription:
        """Live entries of `queues` after `heads` (each queue's last entry number when the caller read
        it; entries the namespace's tail read already are not given again: the caller reads its
        history itself after this)."""
        subscription = Subscription(ns, queues)
        if self.closed:
            subscription.closed()
            return subscription
        tail = self._tails.get(ns)
        if tail is None:
            tail = self._tails[ns] = _NamespaceTail(self, ns)
        subscription.covered = tail.join(subscription, heads)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        tail = self._tails.get(subscription.ns)
        if tail is not None:
            tail.leave(subscription)

    def forget(self, tail: _NamespaceTail) -> None:
        if self._tails.get(tail.ns) is tail and not tail.subscriptions:
            del self._tails[tail.ns]

    def watching(self) -> int:
        """How many streams are open (the same one counted once per queue it watches)."""
        return sum(len(subs) for tail in self._tails.values() for subs in tail.subscriptions.values())

    async def close(self) -> None:
        """Ends every open stream now and the reading loops."""
        self.closed = True
        tails = list(self._tails.values())
        for tail in tails:
            for subscriptions in tail.subscriptions.values():
                for subscription in subscriptions:
                    subscription.closed()
        await asyncio.gather(*(tail.loop.cancel() for tail in tails))
