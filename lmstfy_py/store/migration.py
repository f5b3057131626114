"""A pool being migrated to another (`migrate_to`): lmstfy's rules, routing each call to a pool.

New jobs go to the new pool; consumers drain the old pool first (never waiting on it); whatever
names a job or a queue looks in both. The rules are the class body: one job by id where it
lives (old first); counts summed; pause, ping and stops on both; names united; lists and bulk
dead-letter operations the old pool's up to the limit, the new pool's the rest (the old pool's
jobs are older). Recurring jobs are registered in the new pool, a put replacing the old pool's.

Why a router and not a Layout (store/layout.py): a Layout's jobs move into our layout inside the
script that reserves them, on the same Redis. The two pools of a migration are two Redis
deployments, and no step is atomic across both: a job stays, and changes state, in the pool that
holds it (lmstfy's rule too). So this class spells no key and runs no script; every job operation
is the one Engine's (store/engine.py), this only chooses whose.

A long-poll waits on the new pool's wake lists (new jobs arrive there) in slices of
MIGRATION_SLICE_S and looks at the old pool between slices: a job coming due there is seen at
most a slice late. After a wait the new pool is asked first, so a wake token taken from it is
never left unused. The old pool's pump keeps running (Runtime pumps every pool's Engine). When
the old pool reads empty (sizes, dead letters, timers), drop `migrate_to` (docs/MIGRATING.md).
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import astuple
from typing import Any, Concatenate, ParamSpec, TypeVar

from lmstfy_py.errors import NotFound
from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.long_poll import long_poll
from lmstfy_py.types import (
    DeadLetterHead,
    DeadPage,
    DueBuckets,
    Job,
    JobInfo,
    NewJob,
    Published,
    PusherWait,
    QueueStats,
)

MIGRATION_SLICE_S = 0.5
P = ParamSpec("P")
T = TypeVar("T")
Routed = Callable[Concatenate["MigrationEngine", P], Coroutine[Any, Any, T]]


def _where_it_lives(op: Callable[Concatenate[Engine, P], Awaitable[T]]) -> Routed[P, T]:
    """The old pool's `op`, or the new pool's when the old has no such job (or queue head)."""

    async def routed(self: MigrationEngine, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await op(self.old, *args, **kwargs)
        except NotFound:
            return await op(self.new, *args, **kwargs)

    return routed


def _both(op: Callable[Concatenate[Engine, P], Awaitable[T]], merge: Callable[[T, T], T]) -> Routed[P, T]:
    """`op` on the old pool, then on the new; `merge` of their answers."""

    async def routed(self: MigrationEngine, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return merge(await op(self.old, *args, **kwargs), await op(self.new, *args, **kwargs))

    return routed


def _in_new(op: Callable[Concatenate[Engine, P], Awaitable[T]]) -> Routed[P, T]:
    """The new pool's `op` alone."""

    async def routed(self: MigrationEngine, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await op(self.new, *args, **kwargs)

    return routed


def _the_new_pools(old: T, new: T) -> T:
    return new


def _done(old: None, new: None) -> None:
    return None


def _united(old: list[str], new: list[str]) -> list[str]:
    return sorted(set(old) | set(new))


def _added_up(old: QueueStats, new: QueueStats) -> QueueStats:
    ready_since = [ms for ms in (old.oldest_ready_ms, new.oldest_ready_ms) if ms is not None]
    return QueueStats(
        old.ready + new.ready,
        old.delayed + new.delayed,
        old.reserved + new.reserved,
        old.dead + new.dead,
        old.paused or new.paused,
        min(ready_since, default=None),
        DueBuckets(*(a + b for a, b in zip(astuple(old.due), astuple(new.due), strict=True))),
    )


def _new_ones_won(old: list[ScheduleState], new: list[ScheduleState]) -> list[ScheduleState]:
    found = {(state.schedule.queue, state.schedule.name): state for state in (*old, *new)}
    return [found[key] for key in sorted(found)]


def _heads(old: DeadLetterHead, new: DeadLetterHead) -> DeadLetterHead:
    """The old pool's dead jobs are older: its head is the oldest of both."""
    return DeadLetterHead(old.size + new.size, old.head if old.size else new.head)


class MigrationEngine:
    def __init__(self, old: Engine, new: Engine) -> None:
        self.pool = old.pool
        self.old = old  # may serve what lmstfy left too: an Engine with an LmstfyLayout
        self.new = new

    # A job by id, or a queue's head: where it lives, the old pool first.
    release = _where_it_lives(Engine.release)
    touch = _where_it_lives(Engine.touch)
    bury = _where_it_lives(Engine.bury)
    peek_job = _where_it_lives(Engine.peek_job)
    peek_queue = _where_it_lives(Engine.peek_queue)
    respawn_one = _where_it_lives(Engine.respawn_one)
    delete_dead_one = _where_it_lives(Engine.delete_dead_one)
    complete = _where_it_lives(Engine.complete)
    result = _where_it_lives(Engine.result)
    promote = _where_it_lives(Engine.promote)
    # Both pools. A job lives in one only: the counts add up.
    ack = _both(Engine.ack, operator.or_)
    ack_many = _both(Engine.ack_many, operator.add)
    size = _both(Engine.size, operator.add)
    stats = _both(Engine.stats, _added_up)
    queue_exists = _both(Engine.queue_exists, operator.or_)
    pause = _both(Engine.pause, _done)
    destroy = _both(Engine.destroy, operator.add)
    dead_letter = _both(Engine.dead_letter, _heads)
    dead_letter_size = _both(Engine.dead_letter_size, operator.add)
    namespaces = _both(Engine.namespaces, _united)
    queues = _both(Engine.queues, _united)
    schedules = _both(Engine.schedules, _new_ones_won)
    timer_size = _both(Engine.timer_size, operator.add)
    purge_namespace = _both(Engine.purge_namespace, operator.add)
    ping = _both(Engine.ping, _done)
    stop_waiting = _both(Engine.stop_waiting, _done)  # so no wait of either pool lingers
    # A queue's settings: the new pool's, where new jobs are published and read them; set on both,
    # as they outlive the migration (which ends by dropping the old pool) and its old jobs end there.
    queue_settings = _in_new(Engine.queue_settings)
    set_queue_settings = _both(Engine.set_queue_settings, _the_new_pools)
    # Events: the new pool's log, where new jobs are published and every job ends up (a job still in
    # the old pool records its changes in the old pool's log, which the migration drops).
    open_events = _in_new(Engine.open_events)
    # Groups: new jobs (the only ones with a group) are published to the new pool.
    groups_in_flight = _in_new(Engine.groups_in_flight)

    async def _old_then_new(self, limit: int, call: Callable[[Engine, int], Awaitable[list[T]]]) -> list[T]:
        found = await call(self.old, limit)
        return found + await call(self.new, limit - len(found)) if len(found) < limit else found

    async def _counted_old_then_new(self, limit: int, call: Callable[[Engine, int], Awaitable[int]]) -> int:
        done = await call(self.old, limit)
        return done + await call(self.new, limit - done) if done < limit else done

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> Published:
        return (await self.publish_many(ns, queue, [job], replaces))[0]

    async def publish_many(
        self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None
    ) -> list[Published]:
        taken = [job.job_id is not None and await self.old.id_taken(ns, queue, job.job_id) for job in jobs]
        fresh = [job for job, is_taken in zip(jobs, taken, strict=True) if not is_taken]
        published = iter(await self.new.publish_many(ns, queue, fresh, replaces) if fresh else [])
        if replaces:
            # After the publish: a crash in between redelivers the old job rather than losing the new one.
            await self.old.ack(ns, queue, replaces)
        return [
            Published(str(job.job_id), False) if is_taken else next(published)
            for job, is_taken in zip(jobs, taken, strict=True)
        ]

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
        for queue, job_ids in (acks or {}).items():  # in both pools, as ack_many
            await self.ack_many(ns, queue, job_ids)
        source = self.new

        async def attempt(waited: bool) -> list[Job]:
            nonlocal source
            for source in (self.new, self.old) if waited else (self.old, self.new):
                if jobs := await source.reserve(ns, queues, ttr_ms, count, frozen=pusher is not None):
                    return jobs
            return []

        # A pusher's recheck_s is no use here: the old pool is looked at every slice anyway.
        jobs = await long_poll(
            attempt,
            lambda left: self.new.wait_for_wake(ns, queues, min(left, MIGRATION_SLICE_S)),
            timeout_ms,
            lambda: self.stopping,
            pusher.interrupt if pusher else None,
        )
        source.observer.consumed(source.pool, ns, queues, count, jobs)  # by the pool that held them
        return jobs

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        return await self._old_then_new(limit, lambda pool, left: pool.next_jobs(ns, queue, left))

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        return await self._old_then_new(limit, lambda pool, left: pool.dead_letter_ids(ns, queue, left))

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage:
        try:
            page = await self.old.dead_page(ns, queue, limit, after)
        except NotFound:  # `after` is in the new pool's part (or in neither: the new pool says so)
            return await self.new.dead_page(ns, queue, limit, after)
        if page.next is not None or not await self.new.dead_letter_size(ns, queue):
            return page
        if len(page.jobs) == limit:  # full, and the new pool's part follows: continue after its last job
            return DeadPage(page.jobs, page.jobs[-1].job_id)
        rest = await self.new.dead_page(ns, queue, limit - len(page.jobs), None)
        return DeadPage(page.jobs + rest.jobs, rest.next)

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        return await self._counted_old_then_new(limit, lambda pool, left: pool.respawn(ns, queue, left, ttl_ms))

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int:
        return await self._counted_old_then_new(limit, lambda pool, left: pool.delete_dead(ns, queue, left))

    async def put_schedule(self, ns: str, schedule: Schedule, cap: int = 0) -> tuple[bool, int]:
        created, first = await self.new.put_schedule(ns, schedule, cap)
        replaced_old = await _deleted(self.old.delete_schedule(ns, schedule.queue, schedule.name))
        return created and not replaced_old, first

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState:
        try:
            return await self.new.schedule(ns, queue, name)
        except NotFound:
            return await self.old.schedule(ns, queue, name)

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None:
        deleted = [await _deleted(pool.delete_schedule(ns, queue, name)) for pool in (self.old, self.new)]
        if not any(deleted):
            raise NotFound("schedule not found")

    @property
    def stopping(self) -> bool:
        return self.new.stopping  # its long-polls wait on the new pool's wake lists


async def _deleted(deleting: Awaitable[None]) -> bool:
    try:
        await deleting
    except NotFound:
        return False
    return True
