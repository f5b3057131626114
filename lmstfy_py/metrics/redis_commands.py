"""lmstfy >= 1.0.11's Redis client families, `infra_lmstfy_redis_qps` and `_latency`, fed by every command.

lmstfy's go-redis hook counts each command (a pipeline as one, "pipeline") by node (the Redis
address), command (lower-cased) and status ("ok", a nil reply included, or "error"), and
observes its latency in whole milliseconds as Go's Duration.Milliseconds() truncates it.

Writing a sample costs ~8 µs (prometheus-client's multiprocess values are mmapped files, each
write under a lock): 3 % of a publish if done per command. So a command is only tallied, in
plain dicts (~0.4 µs), and each process's `CommandFlusher` writes its tallies to the families
every FLUSH_EVERY_S, as does a scrape for the process answering it: a scrape sees the other
workers' commands up to a second late. Counts and sums are exact: nothing is sampled.

Tallies are plain dicts without locks: they are touched on the event loop's thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from lmstfy_py import tasks
from lmstfy_py.metrics.families import REDIS_COMMAND_MS_BUCKETS, REDIS_LATENCY, REDIS_QPS
from lmstfy_py.metrics.multiproc import directory
from lmstfy_py.metrics.recording import series

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 1.0
_BUCKETS = len(REDIS_COMMAND_MS_BUCKETS) + 1  # and +Inf
_LAST_BUCKET = _BUCKETS - 1
_COUNT, _SUM_MS, _FIRST_BUCKET = 0, 1, 2

Tally = list[int]  # [count, sum of whole ms, count per bucket...]


class CommandTally:
    """The commands sent to one Redis node: what the store's clients count into (store/counted.py)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.ok: dict[str, Tally] = {}  # by command name as sent
        self.failed: dict[str, Tally] = {}

    def __call__(self, command: str, failed: bool, seconds: float) -> None:
        ms = int(seconds * 1000)
        by_command = self.failed if failed else self.ok
        tally = by_command.get(command)
        if tally is None:
            tally = by_command[command] = [0] * (_FIRST_BUCKET + _BUCKETS)
        tally[_COUNT] += 1
        tally[_SUM_MS] += ms
        # Bounds 1, 2, 4 ... 32768: the first bound >= ms is 2 ** bit_length(ms - 1).
        tally[_FIRST_BUCKET + (min((ms - 1).bit_length(), _LAST_BUCKET) if ms > 1 else 0)] += 1

    def write(self) -> None:
        """Adds this tally to the families and starts it again from zero."""
        for status, by_command in (("ok", self.ok), ("error", self.failed)):
            for command, tally in list(by_command.items()):
                del by_command[command]
                labels = (self.node, str(command).lower(), status)
                series(REDIS_QPS, *labels).inc(tally[_COUNT])
                _observe_many(series(REDIS_LATENCY, *labels), tally[_SUM_MS], tally[_FIRST_BUCKET:])


def _observe_many(histogram: Any, total: float, per_bucket: Tally) -> None:
    """What `per_bucket[i]` calls of histogram.observe() landing in bucket i would add, in one write per
    bucket rather than per observation. prometheus-client (0.26) keeps a child's sum and its
    non-cumulative bucket counts in `_sum` and `_buckets`, which observe() itself increments
    (tests/test_metrics.py checks the exposition)."""
    histogram._sum.inc(total)
    for bucket, count in zip(histogram._buckets, per_bucket, strict=True):
        if count:
            bucket.inc(count)


_TALLIES: dict[str, CommandTally] = {}  # every node's tally in this process


def redis_command_counter(node: str) -> CommandTally:
    """The counter of the store's clients of Redis node `node` (its address as configured)."""
    tally = _TALLIES.get(node)
    if tally is None:
        tally = _TALLIES[node] = CommandTally(node)
    return tally


def flush_redis_commands() -> None:
    """Writes this process's tallies to the families now (and so to the next scrape of any worker).
    Never raises: metrics that cannot be written (a full disk) must not fail a scrape or a stop."""
    try:
        directory()
        for tally in _TALLIES.values():
            tally.write()
    except Exception:
        log.exception("metrics: writing the Redis command tallies failed")


class CommandFlusher:
    """The loop of each server process that writes its tallies every FLUSH_EVERY_S."""

    def __init__(self) -> None:
        self._loop = tasks.Loop("redis-commands", self._step)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        flush_redis_commands()

    async def _step(self) -> float:
        flush_redis_commands()
        return FLUSH_EVERY_S
