"""A loop driven by a pool-wide due index: the timer pump (store/pump.py) and the recurring-jobs
scheduler (store/scheduler.py) are both one.

It does not tick. The index (a zset: namespace -> its earliest due ms) tells which namespaces
are due; the loop serves those (`serve`), then sleeps until the index's earliest due time,
capped at `max_sleep_s` so that what other processes schedule is seen within that cap, and is
woken early by what this process schedules (`schedule`). A sleep that ends at the due time it
planned for serves that namespace at once; each namespace served costs its `serve` and one more
round trip (docs/PERFORMANCE.md, "Where a late job's time goes"). A sweep every `sweep_every_s`
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

from redis.asyncio.cluster import RedisCluster

from lmstfy_py import tasks
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.scripts import Command

DUE_BATCH = 100  # due namespaces one step serves at most

Head = tuple[bytes, float]  # an index entry: a namespace and its earliest due ms


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
        self._plan: Head | None = None  # the index entry the coming sleep ends for
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
        plan, self._plan = self._plan, None
        # Woken for the namespace it planned to serve: at it at once, without reading the index
        # first (a round trip behind every other client's commands, which the due jobs would wait
        # for). Should the plan be stale, serving finds nothing, and the index read after it corrects it.
        head = plan if plan is not None and plan[1] <= self.clock() else await self._index_head()
        served = 0
        while head is not None and head[1] <= self.clock() and served < DUE_BATCH:
            head = await self.serve_namespace(head[0], self.clock())
            served += 1
        if time.monotonic() >= self._next_sweep:
            await self.sweep()
            self._next_sweep = time.monotonic() + self.sweep_every_s
        if head is None:
            return self.max_sleep_s
        # Against the wall clock to the microsecond where it is the real one: the whole
        # milliseconds of clock() would make every sleep end up to a millisecond late.
        now_exact = time.time() * 1000 if self.clock is now_ms else self.clock()
        sleep_s = max(0.0, (head[1] - now_exact) / 1000)
        if sleep_s <= self.max_sleep_s:
            self._plan = head
        return min(self.max_sleep_s, sleep_s)

    async def _index_head(self) -> Head | None:
        """The index's earliest entry. On a standalone pool through the auto-pipelined client of the
        job steps: a quarter of redis-py's cost per command (63 against 249 µs, measured), which is
        how late a due job starts moving."""
        [head] = await self._in_order([("ZRANGE", self.index, 0, 0, "WITHSCORES")])
        return _first(head)

    async def serve_namespace(self, ns: bytes, now: int) -> Head | None:
        """Serves one namespace and sets its index entry; returns the index's earliest entry after that."""
        next_due = await self.serve(ns.decode(), now)
        # Set the index to the next due time, then look again: something scheduled after `serve`
        # looked, whose index update (ZADD LT) landed before our set, would otherwise wait for
        # the sweep. The set, the look and the index read in one round trip where they run in order.
        update = ("ZREM", self.index, ns) if next_due == -1 else ("ZADD", self.index, next_due, ns)
        look = ("ZRANGE", self.due_key(ns.decode()), 0, 0, "WITHSCORES")
        _, again_found, head_found = await self._in_order([update, look, ("ZRANGE", self.index, 0, 0, "WITHSCORES")])
        head, again = _first(head_found), _first(again_found)
        if again is not None and (next_due == -1 or again[1] < next_due):
            await self.redis.zadd(self.index, {ns: again[1]}, lt=True)
            if head is None or again[1] < head[1]:
                head = (ns, again[1])
        return head

    async def _in_order(self, commands: Sequence[Command]) -> list[Any]:
        """The commands' replies, each command run after the one before: one pipeline on a client
        with one connection per pipeline (the auto-pipelined one, redis-py's standalone and
        sentinel), one after another on a cluster, whose pipeline runs each node's part apart."""
        client = self.engine.script_client
        if isinstance(client, RedisCluster):
            return [await client.execute_command(*command) for command in commands]
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return cast(list[Any], await pipe.execute())

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


def _first(found: Any) -> Head | None:
    """The first entry of a ZRANGE ... WITHSCORES reply: as sent (member, score ...), or as redis-py
    pairs it where it knows the option (a cluster's execute_command)."""
    if not found:
        return None
    if isinstance(found[0], (list, tuple)):
        return bytes(found[0][0]), float(found[0][1])
    return bytes(found[0]), float(found[1])
