"""The loop that fires recurring jobs (SPEC section 9), one per pool per process.

Like the timer pump (store/pump.py) it does not tick: the pool-wide index (namespace -> earliest
next tick) says which namespaces are due; the loop fires those (store/schedule_ops.fire_due),
then sleeps until the index's earliest tick, capped at MAX_SLEEP_S so that schedules registered
by other processes are seen, and is woken early by the schedules this process registers. A
sweep every SWEEP_EVERY_S re-derives the index from every namespace, repairing what a crash
between a script and its index update could leave. Any number of processes may run it on one
pool: each tick is claimed by one atomic script, so it gives one job.

The clock is a parameter, so tests can walk a schedule through a DST change.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import cast

from lmstfy_py import tasks
from lmstfy_py.store import keys, schedule_ops
from lmstfy_py.store.engine import Engine, now_ms

MAX_SLEEP_S = 0.5
SWEEP_EVERY_S = 2.0
DUE_BATCH = 100


class Scheduler:
    def __init__(self, engine: Engine, clock: Callable[[], int] = now_ms) -> None:
        self.engine = engine
        self.redis = engine.redis
        self.clock = clock
        self._planned_ms: float = math.inf  # when the coming sleep ends; infinite while a step runs
        self._next_sweep = 0.0
        self.loop = tasks.Loop("scheduler", self._step, engine.pool)
        engine.ticks.listen(self.schedule)

    def schedule(self, tick_ms: int) -> None:
        """A schedule of this process's: wake early if its first tick comes before our plan."""
        if tick_ms < self._planned_ms:
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
        """Fires the due ticks of every namespace; returns how long to sleep. Idle, it costs one command."""
        head = cast(list[tuple[bytes, float]], await self.redis.zrange(keys.CRON_INDEX, 0, 0, withscores=True))
        next_ms = head[0][1] if head else math.inf
        now = self.clock()
        if next_ms <= now:
            due = cast(
                list[bytes], await self.redis.zrangebyscore(keys.CRON_INDEX, "-inf", now, start=0, num=DUE_BATCH)
            )
            for ns in due:
                await self.fire_namespace(ns.decode(), now)
            next_ms = 0  # look at the index again at once: more may have come due meanwhile
        if time.monotonic() >= self._next_sweep:
            namespaces = await self.engine.namespaces()
            if namespaces:
                await schedule_ops.index_heads(self.engine, namespaces)
            self._next_sweep = time.monotonic() + SWEEP_EVERY_S
        return max(0.0, min(MAX_SLEEP_S, (next_ms - self.clock()) / 1000))

    async def fire_namespace(self, ns: str, now: int) -> None:
        head = await schedule_ops.fire_due(self.engine, ns, now)
        # Set the index to the next tick, then look again: a schedule registered after our look
        # whose index update (ZADD LT) landed before our set would otherwise wait for the sweep.
        if head == -1:
            await self.redis.zrem(keys.CRON_INDEX, ns)
        else:
            await self.redis.zadd(keys.CRON_INDEX, {ns: head})
        again = cast(list[tuple[bytes, float]], await self.redis.zrange(keys.schedule_ticks(ns), 0, 0, withscores=True))
        if again and (head == -1 or again[0][1] < head):
            await self.redis.zadd(keys.CRON_INDEX, {ns: again[0][1]}, lt=True)
