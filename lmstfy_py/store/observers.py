"""Several EngineObservers behind the one an Engine takes: the metrics and the dashboard's rates."""

from __future__ import annotations

from collections.abc import Sequence

from lmstfy_py.store.engine import EngineObserver, PumpResult, TracedStep
from lmstfy_py.types import Job, NewJob


class Observers(EngineObserver):
    """Tells each observer of every job operation, in the order given. An observer must not raise:
    the operation it is told of has already happened (see metrics.recording._never_raises)."""

    def __init__(self, *observers: EngineObserver) -> None:
        self.observers = observers

    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        for observer in self.observers:
            observer.published(pool, ns, queue, jobs, replaces)

    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        for observer in self.observers:
            observer.consumed(pool, ns, queues, count, jobs)

    def acked(self, pool: str, ns: str, queue: str, job_id: str) -> None:
        for observer in self.observers:
            observer.acked(pool, ns, queue, job_id)

    def respawned(self, pool: str, ns: str, queue: str, count: int) -> None:
        for observer in self.observers:
            observer.respawned(pool, ns, queue, count)

    def pumped(self, pool: str, ns: str, result: PumpResult) -> None:
        for observer in self.observers:
            observer.pumped(pool, ns, result)

    def traced(self, step: TracedStep) -> None:
        for observer in self.observers:
            observer.traced(step)
