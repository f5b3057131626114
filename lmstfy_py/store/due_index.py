"""A loop driven by a pool-wide due index: the timer pump (store/pump.py) and the recurring-jobs
scheduler (store/scheduler.py) are both one.

It does not tick. The index (a zset: namespace -> its earliest due ms) tells which namespaces
are due; the loop serves those (`serve`), then sleeps until the index's earliest due time,
capped at `max_sleep_s` so that what other processes schedule is seen within that cap, and is
woken early by what this process schedules (`schedule`). A sweep every `sweep_every_s`
re-derives the index from every namespace, repairing what a crash between a script and its
index update could leave. Several processes may run the same loop on one pool: each step on a
namespace is one atomic script, so nothing is done twice. It runs as a tasks.Loop: while Redis
is away it retries with a backoff of at most a second, and a bug cannot end it silently.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from lmstfy_py import tasks
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pipelined import PipelinedRedis

DUE_BATCH = 100  # due namespaces one look at the index takes


class DueIndexLoop(tasks.OneLoop, abc.ABC):
    """Subclasses say which index (`index`), what serving a due namespace means (`serve`, returning
    the namespace's next due ms or -1) and which key holds a namespace's due times (`due_key`)."""

    index: str
    max_sleep_s: float
    sweep_every_s: float

    def __init__(self, kind: str, engine: Engine, clock: Callable[[], int] = now_ms) -> None:
        self.engine = engine
        self.redis = engine.redis
        self.clock = clock
        # When the coming sleep ends (ms); infinite while a step runs, so anything scheduled
        # meanwhile makes the next sleep not happen.
        self._planned_ms: float = math.inf
        self._next_sweep = 0.0
        self.loop = tasks.Loop(kind, self._step, engine.pool)

    @abc.abstractmethod
    async def serve(self, ns: str, now: int) -> int: ...

    @abc.abstractmethod
    def due_key(self, ns: str) -> str: ...

    def schedule(self, due_ms: int) -> None:
        """Called for what this process schedules: wake early if it is due before our plan."""
        if due_ms < self._planned_ms:
            self.loop.wake()

    async def _step(self) -> float:
        self._planned_ms = math.inf
        sleep_s = await self.tick()
        self._planned_ms = now_ms() + sleep_s * 1000
        return sleep_s

    async def tick(self) -> float:
        """Serves the due namespaces; returns how long to sleep. Idle, it costs one command."""
        head = await self._index_head()
        next_ms = head[0][1] if head else math.inf
        now = self.clock()
        if next_ms <= now:
            # The earliest namespace at once: its jobs move one round trip sooner than if the list
            # of every due namespace were fetched first (the common case: one namespace is due).
            await self.serve_namespace(head[0][0].decode(), now)
            due = cast(list[bytes], await self.redis.zrangebyscore(self.index, "-inf", now, start=0, num=DUE_BATCH))
            for ns in due:
                await self.serve_namespace(ns.decode(), now)
            next_ms = 0  # look at the index again at once: more may have come due meanwhile
        if time.monotonic() >= self._next_sweep:
            await self.sweep()
            self._next_sweep = time.monotonic() + self.sweep_every_s
        # Against the wall clock to the microsecond where it is the real one: the whole
        # milliseconds of clock() would make every sleep end up to a millisecond late.
        now_exact = time.time() * 1000 if self.clock is now_ms else self.clock()
        return max(0.0, min(self.max_sleep_s, (next_ms - now_exact) / 1000))

    async def _index_head(self) -> list[tuple[bytes, float]]:
        """The index's earliest entry. On a standalone pool through the auto-pipelined client of the
        job steps: a quarter of redis-py's cost per command (63 against 249 µs, measured), which is
        how late a due job starts moving."""
        client = self.engine.script_client
        if isinstance(client, PipelinedRedis):
            return _pairs(await client.execute_command("ZRANGE", self.index, 0, 0, "WITHSCORES"))
        return cast(list[tuple[bytes, float]], await self.redis.zrange(self.index, 0, 0, withscores=True))

    async def serve_namespace(self, ns: str, now: int) -> None:
        next_due = await self.serve(ns, now)
        # Set the index to the next due time, then look again: something scheduled after `serve`
        # looked, whose index update (ZADD LT) landed before our set, would otherwise wait for
        # the sweep.
        if next_due == -1:
            await self.redis.zrem(self.index, ns)
        else:
            await self.redis.zadd(self.index, {ns: next_due})
        again = _head(await self.redis.zrange(self.due_key(ns), 0, 0, withscores=True))
        if again != -1 and (next_due == -1 or again < next_due):
            await self.redis.zadd(self.index, {ns: again}, lt=True)

    async def sweep(self) -> None:
        namespaces = await self.engine.namespaces()
        if namespaces:
            await index_heads(self.redis, self.index, namespaces, self.due_key)


async def index_heads(redis: Any, index: str, namespaces: Sequence[str], due_key: Callable[[str], str]) -> None:
    """Lowers each namespace's entry in `index` to the earliest due time in its `due_key(ns)`."""
    pipe = redis.pipeline(transaction=False)
    for ns in namespaces:
        pipe.zrange(due_key(ns), 0, 0, withscores=True)
    heads = await pipe.execute()
    pipe = redis.pipeline(transaction=False)
    for ns, head in zip(namespaces, heads, strict=True):
        if head:
            pipe.zadd(index, {ns: head[0][1]}, lt=True)
    await pipe.execute()


def _pairs(flat: Any) -> list[tuple[bytes, float]]:
    """A ZRANGE ... WITHSCORES reply as sent (member, score, member, score ...) as pairs."""
    return [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]


def _head(found: Any) -> int:
    return int(found[0][1]) if found else -1
