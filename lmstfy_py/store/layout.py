"""The port through which an Engine serves what its pool holds besides lmstfy-py's own layout.

A pool whose Redis still holds lmstfy's layout (store/lmstfy_format.py) is served by its Engine
with a Layout: the Engine alone publishes, consumes, ACKs, releases, peeks, pumps and kills jobs,
and asks its Layout, at a few points, what the other layout holds: jobs to reserve first (each
moved into our layout by the script that reserves it), ids to drop after an ACK, jobs to show,
count, list or delete beside ours, dead letters to adopt before a dead-letter operation. An
Engine without one (`layout is None`, the common case) asks nothing and pays nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lmstfy_py.types import Job, JobInfo


class Layout(Protocol):
    async def reserve_first(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool) -> list[Job]:
        """Jobs to deliver before the Engine's own, reserved and moved into our layout; [] for none."""
        ...

    def wait_slice_s(self, recheck_s: float | None) -> float:
        """How long a long-poll may wait for a wake-up before it looks again (the other layout wakes nobody)."""
        ...

    async def acked(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        """After an ACK (or a re-publish) of these ids: drops what the other layout holds of them; how many."""
        ...

    async def id_taken(self, ns: str, queue: str, job_id: str) -> bool: ...

    async def find(self, ns: str, queue: str, job_id: str) -> JobInfo | None:
        """A job the Engine does not hold, by id."""
        ...

    async def ready_ahead(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """Up to `limit` ready jobs delivered before the Engine's own, in that order."""
        ...

    async def ready_count(self, ns: str, queue: str) -> int: ...

    async def adopt_dead(self, ns: str, queue: str) -> None:
        """Before a dead-letter operation: moves the other layout's dead jobs behind ours."""
        ...

    async def names(self, ns: str | None) -> set[str]:
        """The namespaces (ns None) or the queues of `ns` the other layout knows."""
        ...

    async def drop_queue(self, ns: str, queue: str) -> int:
        """Deletes the queue's ready jobs in the other layout; how many."""
        ...

    async def drop_namespace(self, ns: str) -> int:
        """Deletes every job of the namespace in the other layout; how many."""
        ...
