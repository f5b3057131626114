"""lmstfy >= 1.0.11's Redis client families, `infra_lmstfy_redis_qps` and `_latency`, fed by every command.

lmstfy's go-redis hook counts each command (a pipeline as one, "pipeline") by node (the Redis
address), command (lower-cased) and status ("ok", a nil reply included, or "error"), and
observes its latency in whole milliseconds as Go's Duration.Milliseconds() truncates it.

A command is tallied in plain dicts by node, name and status (~0.4 µs, cheaper than the buffered
series of metrics/pending.py, which need a label lookup), and the tallies are added to those
buffers at each flush (pending.before_flush): a scrape sees the other workers' commands up to a
second late. Counts and sums are exact: nothing is sampled.

Tallies are plain dicts without locks: they are touched on the event loop's thread only.
"""

from __future__ import annotations

from lmstfy_py.metrics import pending
from lmstfy_py.metrics.families import REDIS_COMMAND_MS_BUCKETS, REDIS_LATENCY, REDIS_QPS
from lmstfy_py.metrics.multiproc import directory
from lmstfy_py.metrics.recording import series

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
                series(REDIS_LATENCY, *labels).add(tally[_SUM_MS], tally[_FIRST_BUCKET:])


_TALLIES: dict[str, CommandTally] = {}  # every node's tally in this process


def redis_command_counter(node: str) -> CommandTally:
    """The counter of the store's clients of Redis node `node` (its address as configured)."""
    tally = _TALLIES.get(node)
    if tally is None:
        tally = _TALLIES[node] = CommandTally(node)
    return tally


def add_redis_commands() -> None:
    """Adds this process's tallies to the families' buffers; pending.flush() calls it first."""
    directory()
    for tally in _TALLIES.values():
        tally.write()


pending.before_flush.append(add_redis_commands)
