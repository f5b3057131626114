"""The loop that fires recurring jobs (SPEC section 9), one per pool per process.

A DueIndexLoop (store/due_index.py) over the pool's schedule index (keys.CRON_INDEX: namespace
-> earliest next tick), serving each due namespace with store/schedule_ops.fire_due. It sleeps
until the earliest tick (within milliseconds), at most MAX_SLEEP_S so that schedules registered
by other processes are seen, and is woken by the schedules this process registers. Any number of
processes may run it on one pool: each tick is claimed by one atomic script, so it gives one job.

The clock is a parameter, so tests can walk a schedule through a DST change.
"""

from __future__ import annotations

from collections.abc import Callable

from lmstfy_py.store import keys, schedule_ops
from lmstfy_py.store.due_index import DueIndexLoop
from lmstfy_py.store.engine import Engine, now_ms


class Scheduler(DueIndexLoop):
    index = keys.CRON_INDEX
    max_sleep_s = 0.5
    sweep_every_s = 2.0

    def __init__(self, engine: Engine, clock: Callable[[], int] = now_ms) -> None:
        super().__init__("scheduler", engine, clock)
        engine.ticks.listen(self.schedule)

    async def serve(self, ns: str, now: int) -> int:
        return await schedule_ops.fire_due(self.engine, ns, now)

    def due_key(self, ns: str) -> str:
        return keys.schedule_ticks(ns)
