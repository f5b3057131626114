"""Publish and consume rates per queue and minute over the last hour: the dashboard's charts.

Counting must cost the job steps nothing they would notice, so nothing is written to Redis on
their path: `RateCounter`, an EngineObserver, adds each publish and consume to counters in the
process (a dict update), and `RateStore`'s flush loop moves them every FLUSH_EVERY_S into the
admin Redis, one hash per pool and minute (keys.rates), with one script call per hash that adds
every field and sets the hash's expiry (admin/lua/rates_add.lua). Every process of every
instance adds its own counts, so the hashes hold the whole server's.

How soon a chart shows a job: `history` adds the process's own counts not written yet to what it
reads, so the process that counted a publish shows it at once; the others see it once written. A
process that was idle checks for counts every IDLE_CHECK_S, so the first job after a quiet spell
is written within that, not up to FLUSH_EVERY_S later; a busy one writes every FLUSH_EVERY_S.

What can be lost: a process killed (SIGKILL, a crash) loses the counts it made since its last
flush, at most FLUSH_EVERY_S of its own traffic; a graceful stop flushes. While the admin Redis
is away counts wait in the process and go with the next flush that succeeds, except those older
than the hour shown. A job counts as published when it was stored (a duplicate business id is
not), as consumed when a consume handed it out (a redelivery counts again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lmstfy_py import tasks
from lmstfy_py.admin.contracts import RATES_ADD, RatesArgs, RatesKeys
from lmstfy_py.store import keys
from lmstfy_py.store.engine import EngineObserver
from lmstfy_py.types import Job, NewJob

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 2.0
# Between flushes that wrote nothing: an empty check costs no Redis call, and the first count after
# a quiet spell reaches the other processes' pages within this instead of FLUSH_EVERY_S.
IDLE_CHECK_S = 0.25
HISTORY_MINUTES = 60
# A minute's hash outlives the hour it is shown in by a margin, counted from its last flush.
EXPIRE_S = (HISTORY_MINUTES + 5) * 60
FIELDS_PER_CALL = 500  # field, increment pairs per script call: a busy minute never makes one huge call
PUBLISHED, CONSUMED = "p", "c"

Bucket = tuple[str, int]  # pool, unix minute


def minute_now() -> int:
    return int(time.time()) // 60


class RateCounter(EngineObserver):
    """Counts publishes and consumes per pool, minute and queue in this process until taken."""

    def __init__(self) -> None:
        self._pending: dict[Bucket, Counter[str]] = {}

    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        if jobs:
            self._add(pool, keys.rate_field(PUBLISHED, ns, queue), len(jobs))

    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self._add(pool, keys.rate_field(CONSUMED, ns, job.queue), 1)

    def _add(self, pool: str, rate_field: str, n: int) -> None:
        bucket = (pool, int(time.time()) // 60)
        counts = self._pending.get(bucket)
        if counts is None:
            counts = self._pending[bucket] = Counter()
        counts[rate_field] += n

    def pending(self) -> dict[Bucket, Counter[str]]:
        """What was counted since the last take (not a copy: read it without awaiting in between)."""
        return self._pending

    def take(self) -> dict[Bucket, Counter[str]]:
        """Everything counted since the last take, now forgotten here."""
        taken, self._pending = self._pending, {}
        return taken

    def give_back(self, taken: dict[Bucket, Counter[str]]) -> None:
        """Counts a flush could not write, added to those made meanwhile."""
        for bucket, counts in taken.items():
            self._pending.setdefault(bucket, Counter()).update(counts)


@dataclass(frozen=True, slots=True)
class Rates:
    """Jobs per minute, oldest first; the last entry is the current, unfinished minute."""

    published: list[int]
    consumed: list[int]

    @classmethod
    def zero(cls, minutes: int = HISTORY_MINUTES) -> Rates:
        return cls([0] * minutes, [0] * minutes)

    def plus(self, other: Rates) -> Rates:
        return Rates(_sum(self.published, other.published), _sum(self.consumed, other.consumed))


def _sum(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


@dataclass(frozen=True, slots=True)
class RateHistory:
    """One pool's rates per queue over the last `minutes`, up to the minute `last_minute`."""

    last_minute: int
    minutes: int = HISTORY_MINUTES
    queues: dict[tuple[str, str], Rates] = field(default_factory=dict)  # (namespace, queue) -> its rates

    def of(self, ns: str, queue: str) -> Rates:
        return self.queues.get((ns, queue)) or Rates.zero(self.minutes)

    def of_namespace(self, ns: str) -> Rates:
        return _total(rates for (name, _), rates in self.queues.items() if name == ns) or Rates.zero(self.minutes)

    def total(self) -> Rates:
        return _total(self.queues.values()) or Rates.zero(self.minutes)


def _total(found: Any) -> Rates | None:
    total: Rates | None = None
    for rates in found:
        total = rates if total is None else total.plus(rates)
    return total


class RateStore(tasks.Background):
    """Writes a RateCounter's counts to the admin Redis every FLUSH_EVERY_S; reads the last hour back."""

    def __init__(self, redis: Any, counter: RateCounter, every_s: float = FLUSH_EVERY_S) -> None:
        self.redis = redis
        self.counter = counter
        self.every_s = every_s
        self._loop = tasks.Loop("rates", self._flush_step)
        # A flush and a read take turns: a read between a flush's write reaching Redis and its taking
        # the written counts off missed them (a publish just shown vanished from the next read).
        self._turn = asyncio.Lock()

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        """Stops the loop, then writes what was counted since its last flush."""
        await self._loop.stop()
        try:
            await self.flush()
        except Exception as exc:  # a stopping server with its Redis away loses those seconds of counts
            log.debug("rates: last flush failed: %r", exc)

    async def _flush_step(self) -> float:
        return self.every_s if await self.flush() else min(IDLE_CHECK_S, self.every_s)

    async def flush(self) -> bool:
        """Writes every count taken from the counter; what it could not write goes back to it.
        Whether there was anything to write."""
        async with self._turn:
            taken = self.counter.take()
            if not taken:
                return False
            oldest = minute_now() - HISTORY_MINUTES
            try:
                for bucket in sorted(taken):
                    if bucket[1] >= oldest:
                        await self._write(bucket, taken[bucket])
                    del taken[bucket]
            finally:
                self.counter.give_back(taken)
            return True

    async def _write(self, bucket: Bucket, counts: Counter[str]) -> None:
        items = sorted(counts.items())
        for at in range(0, len(items), FIELDS_PER_CALL):
            pairs = tuple(x for rate_field, n in items[at : at + FIELDS_PER_CALL] for x in (rate_field, n))
            await RATES_ADD(self.redis, RatesKeys(keys.rates(*bucket)), RatesArgs(EXPIRE_S, pairs))
            for rate_field, _ in items[at : at + FIELDS_PER_CALL]:
                del counts[rate_field]  # written: never given back, never counted twice

    async def history(
        self, pool: str, minutes: int = HISTORY_MINUTES, only: tuple[str, str] | None = None
    ) -> RateHistory:
        """The pool's rates per queue over the last `minutes` (the current one included); `only` one queue."""
        last = minute_now()
        first = last - minutes + 1
        pipe = self.redis.pipeline(transaction=False)
        for minute in range(first, last + 1):
            if only is None:
                pipe.hgetall(keys.rates(pool, minute))
            else:
                pipe.hmget(keys.rates(pool, minute), [keys.rate_field(kind, *only) for kind in (PUBLISHED, CONSUMED)])
        async with self._turn:  # no flush between the two reads: each count is in one of them
            found = await pipe.execute()
            unflushed = [(bucket, dict(counts)) for bucket, counts in self.counter.pending().items()]
        queues: dict[tuple[str, str], Rates] = {}
        for at, counts in enumerate(found):
            pairs = counts.items() if only is None else _only_pairs(only, counts)
            for raw_field, raw_count in pairs:
                _count(queues, minutes, at, raw_field, raw_count)
        wanted = None if only is None else {keys.rate_field(kind, *only) for kind in (PUBLISHED, CONSUMED)}
        for (bucket_pool, minute), counts in unflushed:
            if bucket_pool == pool and first <= minute <= last:
                for rate_field, n in counts.items():
                    if wanted is None or rate_field in wanted:
                        _count(queues, minutes, minute - first, rate_field.encode(), n)
        return RateHistory(last, minutes, queues)


def _only_pairs(only: tuple[str, str], counts: list[Any]) -> list[tuple[bytes, Any]]:
    names = [keys.rate_field(kind, *only).encode() for kind in (PUBLISHED, CONSUMED)]
    return [(name, count) for name, count in zip(names, counts, strict=True) if count is not None]


def _count(queues: dict[tuple[str, str], Rates], minutes: int, at: int, raw_field: bytes, raw_count: Any) -> None:
    kind, ns, queue = raw_field.decode().split("/", 2)
    rates = queues.get((ns, queue))
    if rates is None:
        rates = queues[(ns, queue)] = Rates.zero(minutes)
    (rates.published if kind == PUBLISHED else rates.consumed)[at] += int(raw_count)
