"""The contract between the web layer and a pool's storage: every job operation a request makes.

One implementation: `Engine` (store/engine.py), one pool; a pool still holding lmstfy's layout is
served by its Engine with a Layout (store/layout.py). A pool moving to another one is served by
`MigrationEngine` (store/migration.py), which implements no operation: it routes each to one or
both pools' Engines by lmstfy's rules.
`Pools.get` answers a JobStore; the timer pumps, health checks and metrics collector work on
each pool's own Engine (`Pools.engines`).

Times are milliseconds. Operations on one job by id raise NotFound (404) when there is no such
job, Conflict (409) when it is not in the state they need; Redis errors propagate (503).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.types import (
    DeadLetterHead,
    DeadPage,
    Event,
    Gap,
    Job,
    JobInfo,
    NewJob,
    Published,
    PusherWait,
    QueueSettings,
    QueueStats,
    Released,
    SettingsChange,
)


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
        pusher: PusherWait | None = None,
        acks: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Job]:
        """`acks` (queue -> job ids) are ACKed as ack_many would, before anything is reserved."""
        ...

    # -- a worker's verbs on a job it reserved
    async def ack(self, ns: str, queue: str, job_id: str) -> bool: ...

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int: ...

    async def release(
        self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str, untried: bool = False
    ) -> Released: ...

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int: ...

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None: ...

    # -- a queue
    async def peek_queue(self, ns: str, queue: str) -> Job: ...

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]: ...

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo:
        """A job by id, whatever its state; also the record of an ended job still kept (SPEC 13)."""
        ...

    async def size(self, ns: str, queue: str) -> int: ...

    async def stats(self, ns: str, queue: str) -> QueueStats: ...

    async def queue_exists(self, ns: str, queue: str) -> bool: ...

    async def pause(self, ns: str, queue: str, paused: bool) -> None: ...

    async def destroy(self, ns: str, queue: str) -> int: ...

    # -- job outcomes (SPEC 13)
    async def queue_settings(self, ns: str, queue: str) -> QueueSettings: ...

    async def set_queue_settings(self, ns: str, queue: str, change: SettingsChange) -> QueueSettings:
        """Sets those given (values already validated by the web layer); answers all of them. A change
        that lets held jobs go (a limit raised or lifted) wakes the queue's consumers in the same step."""
        ...

    # -- flow control (SPEC 14)
    async def promote(self, ns: str, queue: str, job_id: str) -> None:
        """A delayed job is ready now, as if it had come due (priority and group kept; event `promoted`).
        NotFound("job not found"); Conflict("job is not delayed") for a ready, reserved or dead job (or a record)."""
        ...

    async def groups_in_flight(self, ns: str, queue: str) -> int:
        """How many of the queue's groups have a job reserved (or holding its slot through a release delay)."""
        ...

    async def complete(self, ns: str, queue: str, job_id: str, result: bytes) -> None:
        """ACK that keeps `result`: NotFound (404 "job not found"), Conflict("job is not reserved") when
        the job is not reserved (also an ended job still kept)."""
        ...

    async def result(self, ns: str, queue: str, job_id: str, wait_ms: int) -> tuple[bool, JobInfo]:
        """(ended, info): ended True once the job is completed, dead, expired or deleted (at once, or as
        soon as it is within wait_ms); else False with its current info after wait_ms. NotFound when
        unknown or past its keep. A waiter present at the end gets the end even with keep 0. Every
        waiter is answered within 50 ms of the end; when the pool stops (SIGTERM, stop_waiting) each
        waiter answers at once with (False, current info)."""
        ...

    async def open_events(
        self, ns: str, queues: Sequence[str], after: str | None, idle_s: float = 15.0
    ) -> AsyncIterator[Event | Gap | None]:
        """The event stream of `queues` (SPEC 13 Stream): await it, then iterate what it answers.

        Awaiting it checks everything first (so the web layer answers 4xx before any byte):
        Conflict("events are off for this queue") if any queue's `events` is 0;
        InvalidParameter("invalid after") if `after` is not a cursor of these queues.
        after None: only events after this call; "0": every kept event, then live; a cursor: exactly
        the events after it, none lost or repeated, with a Gap first (per queue) when the next ones
        were trimmed. Live events arrive within ~50 ms of their step. Yields None after `idle_s`
        without an event (the web layer writes an SSE comment). Ends (StopAsyncIteration) when the
        pool stops (stop_waiting: SIGTERM). One queue: cursors are that queue's; several (1..16, the
        merged namespace stream): each cursor says every queue's position (for this list of queues,
        in this order), order kept per queue. The iterator is an async generator: aclose() it (or
        let it end) to leave the live tail."""
        ...

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

    # -- recurring jobs
    async def put_schedule(self, ns: str, schedule: Schedule, cap: int = 0) -> tuple[bool, int]: ...

    async def schedules(self, ns: str, queue: str | None = None) -> list[ScheduleState]: ...

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState: ...

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None: ...

    # -- the pool
    async def ping(self) -> None: ...

    @property
    def stopping(self) -> bool: ...

    async def stop_waiting(self) -> None: ...
