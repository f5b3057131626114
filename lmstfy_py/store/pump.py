"""The timer loop: makes delayed and timed-out reserved jobs ready (or dead).

A DueIndexLoop (store/due_index.py) over the pool's due index ("due": namespace -> earliest
timer member), serving each due namespace with the pump script (engine.pump). Every process
wakes its own pump for the timers it adds, so in normal operation each job is moved on time by
the process that scheduled it; MAX_SLEEP_S only bounds how late a job is when that process died
before its due time. The sweep re-derives the index from every namespace's timer about once a
second.
"""

from __future__ import annotations

from lmstfy_py.store import keys
from lmstfy_py.store.due_index import DueIndexLoop
from lmstfy_py.store.engine import Engine, TimerSignal, now_ms

MAX_SLEEP_S = 0.1
SWEEP_EVERY_S = 1.0


class Pump(DueIndexLoop):
    index = keys.DUE_INDEX
    sweep_every_s = SWEEP_EVERY_S

    def __init__(self, engine: Engine, timers: TimerSignal | None = None, max_sleep_s: float = MAX_SLEEP_S) -> None:
        """`timers`: what the engine tells of the timer entries it adds (its own signal when not given)."""
        super().__init__("pump", engine)
        self.max_sleep_s = max_sleep_s
        (timers or engine.timers).listen(self.schedule)

    async def serve(self, ns: str, now: int) -> int:
        # The time of this very call, not of the step's start: a job due meanwhile moves now.
        return (await self.engine.pump(ns, now_ms())).next_due_ms

    def due_key(self, ns: str) -> str:
        return keys.timer(ns)
