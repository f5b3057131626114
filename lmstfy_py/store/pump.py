"""The timer loop: makes delayed and timed-out reserved jobs ready (or dead).

It does not tick. A per-pool index zset ("due": namespace -> earliest due ms)
tells which namespaces are due; the loop pumps those, then sleeps until the
index's earliest due time, capped at MAX_SLEEP_S so that jobs scheduled by
other processes are seen within that cap, and is woken early by jobs this
process schedules. A sweep about once a second re-derives the index from
every namespace's timer, repairing what a crash between a script and its
index update could leave behind. Several processes may pump one pool: each
move is one atomic script, so no job is moved twice. It runs as a tasks.Loop: while Redis is
away it retries with a backoff of at most a second, and a bug cannot end it silently.
"""

from __future__ import annotations

import math
import time
from typing import cast

from lmstfy_py import tasks
from lmstfy_py.store import keys
from lmstfy_py.store.engine import Engine, TimerSignal, now_ms

# Every process wakes its own pump for the timers it adds (schedule()), so in normal
# operation each job is moved on time by the process that scheduled it. The cap only
# bounds how late a job is when that process died before its due time.
MAX_SLEEP_S = 0.1
SWEEP_EVERY_S = 1.0
DUE_BATCH = 100


class Pump:
    def __init__(self, engine: Engine, timers: TimerSignal | None = None, max_sleep_s: float = MAX_SLEEP_S) -> None:
        """`timers`: what the engine tells of the timer entries it adds (its own signal when not given)."""
        self.engine = engine
        self.redis = engine.redis
        self.max_sleep_s = max_sleep_s
        # When the coming sleep ends (ms); infinite while a tick runs, so anything scheduled meanwhile
        # makes the next sleep not happen.
        self._planned_ms: float = math.inf
        self._next_sweep = 0.0
        self.loop = tasks.Loop("pump", self._step, engine.pool)
        (timers or engine.timers).listen(self.schedule)

    def schedule(self, due_ms: int) -> None:
        """Called for every timer entry this process adds: wake early if it is due before our plan."""
        if due_ms < self._planned_ms:
            self.loop.wake()

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def _step(self) -> float:
        self._planned_ms = math.inf
        sleep_s = await self.tick()
        self._planned_ms = now_ms() + sleep_s * 1000
        return sleep_s

    async def tick(self) -> float:
        """Pumps the due namespaces; returns how long to sleep. Idle, it costs one command."""
        # redis-py types replies loosely; without decode_responses these are bytes and float scores.
        head = cast(list[tuple[bytes, float]], await self.redis.zrange(keys.DUE_INDEX, 0, 0, withscores=True))
        next_ms = head[0][1] if head else math.inf
        if next_ms <= now_ms():
            due = cast(
                list[bytes], await self.redis.zrangebyscore(keys.DUE_INDEX, "-inf", now_ms(), start=0, num=DUE_BATCH)
            )
            for ns in due:
                await self.pump_namespace(ns.decode())
            next_ms = 0  # look at the index again at once: more may have come due meanwhile
        if time.monotonic() >= self._next_sweep:
            await self.sweep()
            self._next_sweep = time.monotonic() + SWEEP_EVERY_S
        return max(0.0, min(self.max_sleep_s, (next_ms - now_ms()) / 1000))

    async def pump_namespace(self, ns: str) -> None:
        result = await self.engine.pump(ns, now_ms())
        # Set the index to the next due time, then look at the timer again: a job
        # scheduled after the script ran but whose index update (ZADD LT) landed
        # before our set would otherwise be hidden until the next sweep.
        if result.next_due_ms == -1:
            await self.redis.zrem(keys.DUE_INDEX, ns)
        else:
            await self.redis.zadd(keys.DUE_INDEX, {ns: result.next_due_ms})
        head = await self.engine.timer_head(ns)
        if head != -1 and (result.next_due_ms == -1 or head < result.next_due_ms):
            await self.redis.zadd(keys.DUE_INDEX, {ns: head}, lt=True)

    async def sweep(self) -> None:
        namespaces = await self.engine.namespaces()
        if not namespaces:
            return
        pipe = self.redis.pipeline(transaction=False)
        for ns in namespaces:
            pipe.zrange(keys.timer(ns), 0, 0, withscores=True)
        heads = await pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for ns, head in zip(namespaces, heads, strict=True):
            if head:
                pipe.zadd(keys.DUE_INDEX, {ns: head[0][1]}, lt=True)
        await pipe.execute()
