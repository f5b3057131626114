"""The contract between the web layer and a pool's storage: every job operation a request makes.

Two implementations, side by side: `Engine` (store/engine.py), one pool, and `MigrationEngine`
(store/migration.py), a pool moving to another one, which composes the two pools' Engines.
`Pools.get` answers a JobStore; the timer pumps, health checks and metrics collector work on
each pool's own Engine (`Pools.engines`).

Times are milliseconds. Operations on one job by id raise NotFound (404) when there is no such
job, Conflict (409) when it is not in the state they need; Redis errors propagate (503).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from lmstfy_py.types import DeadLetterHead, DeadPage, Job, JobInfo, NewJob, Published, QueueStats, Released


class JobStore(Protocol):
    pool: str

    # -- publish and consume
    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> Published: ...

    async def publish_many(
        self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None
    ) -> list[Published]: ...

    async def consume(
        self,
        ns: str,
        queues: Sequence[str],
        ttr_ms: int,
        timeout_ms: int,
        count: int,
        frozen: bool = False,
        interrupt: asyncio.Event | None = None,
    ) -> list[Job]: ...

    # -- a worker's verbs on a job it reserved
    async def ack(self, ns: str, queue: str, job_id: str) -> bool: ...

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int: ...

    async def release(self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str) -> Released: ...

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int: ...

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None: ...

    # -- a queue
    async def peek_queue(self, ns: str, queue: str) -> Job: ...

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo: ...

    async def size(self, ns: str, queue: str) -> int: ...

    async def stats(self, ns: str, queue: str) -> QueueStats: ...

    async def queue_exists(self, ns: str, queue: str) -> bool: ...

    async def pause(self, ns: str, queue: str, paused: bool) -> None: ...

    async def destroy(self, ns: str, queue: str) -> int: ...

    # -- its dead letter
    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead: ...

    async def dead_letter_size(self, ns: str, queue: str) -> int: ...

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]: ...

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage: ...

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int: ...

    async def respawn_one(self, ns: str, queue: str, job_id: str, ttl_ms: int, tries: int, delay_ms: int) -> None: ...

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int: ...

    async def delete_dead_one(self, ns: str, queue: str, job_id: str) -> None: ...

    # -- namespaces
    async def namespaces(self) -> list[str]: ...

    async def queues(self, ns: str) -> list[str]: ...

    async def timer_size(self, ns: str) -> int: ...

    async def purge_namespace(self, ns: str) -> int: ...

    # -- the pool
    async def ping(self) -> None: ...

    @property
    def stopping(self) -> bool: ...

    async def stop_waiting(self) -> None: ...
