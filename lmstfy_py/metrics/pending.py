"""Counts made in this process and written to the multiprocess files in batches, about once a second.

prometheus-client's multiprocess mode writes every `inc` and `observe` to a memory-mapped file under a
lock, after a check that the process has not forked: 1.6 µs a counter step and 3.1 µs a histogram
observation on the test VM, 20-30 µs of metrics in every publish, consume or ACK. Here a request adds
to plain numbers (0.2-0.5 µs), and `Flusher` (or a scrape, or a stop) writes what has changed since
the last flush, one write per series and bucket.

What that costs a reader: a scrape served by one worker sees its own counts at once and the other
workers' as of their last flush, up to FLUSH_S old; a worker killed with SIGKILL loses what it counted
since its last flush (a graceful stop flushes). Counters still only grow.

Gauges (set by the collector, not per request) are written at once: `buffered` gives them back as is.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from typing import Any

from lmstfy_py import tasks

log = logging.getLogger(__name__)

FLUSH_S = 1.0

_dirty: list[_Counter | _Histogram] = []  # series with counts not yet written, each listed once


class _Counter:
    """A counter child's increments since the last flush."""

    __slots__ = ("amount", "child", "listed")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.amount = 0.0
        self.listed = False  # in _dirty

    def inc(self, amount: float = 1.0) -> None:
        if not self.listed:
            self.listed = True
            _dirty.append(self)
        self.amount += amount

    def flush(self) -> None:
        amount, self.amount, self.listed = self.amount, 0.0, False
        self.child.inc(amount)


class _Histogram:
    """A histogram child's observations since the last flush: a count per bucket and their sum.

    prometheus-client keeps each bucket's own count in the files (the exposition adds them up), and an
    observation goes to the first bucket whose upper bound is at least its value: bisect_left.
    """

    __slots__ = ("bounds", "child", "counts", "listed", "total")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.bounds: list[float] = list(child._upper_bounds)
        self.counts = [0] * len(self.bounds)
        self.total = 0.0
        self.listed = False  # in _dirty

    def observe(self, value: float) -> None:
        if not self.listed:
            self.listed = True
            _dirty.append(self)
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def add(self, total: float, per_bucket: list[int]) -> None:
        """What per_bucket[i] observations landing in bucket i, summing to `total`, would add."""
        if not self.listed:
            self.listed = True
            _dirty.append(self)
        for i, count in enumerate(per_bucket):
            self.counts[i] += count
        self.total += total

    def flush(self) -> None:
        counts, total = self.counts, self.total
        self.counts, self.total, self.listed = [0] * len(self.bounds), 0.0, False
        self.child._sum.inc(total)
        for bucket, count in zip(self.child._buckets, counts, strict=True):
            if count:
                bucket.inc(count)


def buffered(family: Any, child: Any) -> Any:
    """What a request counts on for `child` (a child of `family`): a buffer for counters and
    histograms, the child itself for gauges."""
    kind = getattr(family, "_type", "")
    if kind == "counter":
        return _Counter(child)
    if kind == "histogram":
        return _Histogram(child)
    return child


# Counted elsewhere in a form of their own (metrics/redis_commands.py), added to the buffers first.
before_flush: list[Callable[[], None]] = []


def flush() -> None:
    """Writes every count made since the last flush; never raises (a full disk loses those counts)."""
    global _dirty
    for hook in before_flush:
        try:
            hook()
        except Exception:
            log.exception("metrics: counts could not be added before a flush")
    dirty, _dirty = _dirty, []
    for series in dirty:
        try:
            series.flush()
        except Exception:
            log.exception("metrics: a flush failed; the counts of one series are lost")


class Flusher(tasks.Background):
    """Flushes every FLUSH_S while the server runs, and once more when it stops."""

    def __init__(self) -> None:
        self._loop = tasks.Loop("metrics-flush", self._step)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        flush()

    async def _step(self) -> float:
        flush()
        return FLUSH_S
