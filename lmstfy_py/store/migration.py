"""Serving a pool that is being migrated to another one (`migrate_to` in its config).

lmstfy's migration engine, with the same rules: new jobs go to the new pool, consumers drain
the old pool first, and whatever names a job or a queue looks in both:

| operation                 | old pool | new pool                                               |
|---------------------------|----------|--------------------------------------------------------|
| publish, bulk publish     | -        | all new jobs                                           |
| republish (ACK + publish) | ACK      | publish (and ACK, should the job live there)           |
| consume                   | first, never waiting | then, long-polling; see below              |
| ack                       | yes      | yes                                                    |
| peek queue                | first    | when the old pool has nothing                          |
| next jobs                 | first    | the rest of the limit                                  |
| peek job, release, touch, bury, respawn/delete a dead job by id | where the job lives (old first) | |
| publish with a job_id     | a duplicate when the id is taken here | else published here          |
| size, stats, dead-letter size | summed | summed (paused: when either is)                      |
| pause, resume             | yes      | yes                                                    |
| dead letter by page       | first    | after the old pool's                                   |
| destroy queue             | yes      | yes (the count is summed)                              |
| dead letter head          | its head when it has dead jobs, else the new pool's; sizes summed |
| respawn, delete dead jobs | up to limit | the rest of the limit (jobs stay in their pool)     |
| namespaces, queues        | union    | union                                                  |

A long-poll waits on the new pool's wake lists (new jobs arrive there), in slices of
MIGRATION_SLICE_S, and re-checks the old pool between slices: a job becoming ready in the old
pool (a delayed job coming due, a reservation timing out) is seen at most MIGRATION_SLICE_S
late, while one published to the new pool wakes the consumer at once. After a wait the new
pool is asked first, so a wake token taken from it is never left unused (reserve puts it back
when jobs remain).

The old pool's pump keeps running (Runtime pumps every pool's own Engine) so its delayed and
reserved jobs still come due. When the old pool is empty (its sizes, dead letters and timers
read 0), drop `migrate_to` and point clients at the new pool, or keep the name and swap the
pools' addresses in the config.

A MigrationEngine is a JobStore (store/jobstore.py) built of the two pools' Engines, not an
Engine itself; every operation names which pool it acts on. Operations on one job by id (the
worker verbs, dead letter by id) act where the job lives: the old pool first. Pause and resume
act on both. A business job id is taken when a job of that id is alive (or its unique_for lasts)
in either pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from lmstfy_py.errors import NotFound
from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.long_poll import long_poll
from lmstfy_py.types import DeadLetterHead, DeadPage, Job, JobInfo, NewJob, Published, QueueStats, Released

MIGRATION_SLICE_S = 0.5
T = TypeVar("T")


Source = Engine  # the old pool may hold what lmstfy left: its Engine has a Layout (store/lmstfy_format.py)


class MigrationEngine:
    def __init__(self, old: Source, new: Engine) -> None:
        self.pool = old.pool
        self.old = old
        self.new = new

    async def _where_it_lives(self, call: Callable[[Source], Awaitable[T]]) -> T:
        """`call` on the old pool, or on the new one when the old has no such job."""
        try:
            return await call(self.old)
        except NotFound:
            return await call(self.new)

    # -- publish ---------------------------------------------------------------------------

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

    # -- consume ---------------------------------------------------------------------------

    async def consume(
        self,
        ns: str,
        queues: Sequence[str],
        ttr_ms: int,
        timeout_ms: int,
        count: int,
        frozen: bool = False,
        interrupt: asyncio.Event | None = None,
        recheck_s: float | None = None,
    ) -> list[Job]:
        source = self.new

        async def attempt(waited: bool) -> list[Job]:
            nonlocal source
            # After a wait the new pool first, so a wake token taken from it is never left unused.
            source, jobs = await _reserve_first(
                (self.new, self.old) if waited else (self.old, self.new), ns, queues, ttr_ms, count, frozen
            )
            return jobs

        # `recheck_s` is no use here: the old pool is looked at every MIGRATION_SLICE_S anyway.
        jobs = await long_poll(
            attempt,
            lambda left: self.new.wait_for_wake(ns, queues, min(left, MIGRATION_SLICE_S)),
            timeout_ms,
            lambda: self.stopping,
            interrupt,
        )
        # Counted by the pool that held the jobs, as its own consumes are.
        source.observer.consumed(source.pool, ns, queues, count, jobs)
        return jobs

    # -- a worker's verbs --------------------------------------------------------------------

    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        acked_old = await self.old.ack(ns, queue, job_id)
        return await self.new.ack(ns, queue, job_id) or acked_old

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        # A job lives in one pool only: the counts add up.
        return await self.old.ack_many(ns, queue, job_ids) + await self.new.ack_many(ns, queue, job_ids)

    async def release(
        self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str, untried: bool = False
    ) -> Released:
        return await self._where_it_lives(lambda pool: pool.release(ns, queue, job_id, delay_ms, reason, untried))

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int:
        return await self._where_it_lives(lambda pool: pool.touch(ns, queue, job_id, ttr_ms))

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None:
        await self._where_it_lives(lambda pool: pool.bury(ns, queue, job_id, reason))

    # -- a queue ---------------------------------------------------------------------------

    async def peek_queue(self, ns: str, queue: str) -> Job:
        try:
            return await self.old.peek_queue(ns, queue)
        except NotFound:
            return await self.new.peek_queue(ns, queue)

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """The old pool's next jobs, then the new pool's: consumes drain the old pool first."""
        found = await self.old.next_jobs(ns, queue, limit)
        if len(found) < limit:
            found += await self.new.next_jobs(ns, queue, limit - len(found))
        return found

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo:
        return await self._where_it_lives(lambda pool: pool.peek_job(ns, queue, job_id))

    async def size(self, ns: str, queue: str) -> int:
        return await self.old.size(ns, queue) + await self.new.size(ns, queue)

    async def stats(self, ns: str, queue: str) -> QueueStats:
        old, new = await self.old.stats(ns, queue), await self.new.stats(ns, queue)
        return QueueStats(
            old.ready + new.ready,
            old.delayed + new.delayed,
            old.reserved + new.reserved,
            old.dead + new.dead,
            old.paused or new.paused,
        )

    async def queue_exists(self, ns: str, queue: str) -> bool:
        return await self.old.queue_exists(ns, queue) or await self.new.queue_exists(ns, queue)

    async def pause(self, ns: str, queue: str, paused: bool) -> None:
        await self.old.pause(ns, queue, paused)
        await self.new.pause(ns, queue, paused)

    async def destroy(self, ns: str, queue: str) -> int:
        return await self.old.destroy(ns, queue) + await self.new.destroy(ns, queue)

    # -- dead letter -----------------------------------------------------------------------

    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead:
        old, new = await self.old.dead_letter(ns, queue), await self.new.dead_letter(ns, queue)
        # The old pool's dead jobs are older: its head is the oldest of both.
        return DeadLetterHead(old.size + new.size, old.head if old.size else new.head)

    async def dead_letter_size(self, ns: str, queue: str) -> int:
        return await self.old.dead_letter_size(ns, queue) + await self.new.dead_letter_size(ns, queue)

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        ids = await self.old.dead_letter_ids(ns, queue, limit)
        if len(ids) < limit:
            ids += await self.new.dead_letter_ids(ns, queue, limit - len(ids))
        return ids

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage:
        """The old pool's dead letter, then the new pool's: one list, oldest first."""
        try:
            page = await self.old.dead_page(ns, queue, limit, after)
        except NotFound:  # `after` is in the new pool's part (or in neither: the new pool says so)
            return await self.new.dead_page(ns, queue, limit, after)
        if page.next is not None or not await self.new.dead_letter_size(ns, queue):
            return page
        rest = await self.new.dead_page(ns, queue, limit - len(page.jobs), None) if len(page.jobs) < limit else None
        if rest is None:  # the page is full and the new pool's part follows: continue after its last job
            return DeadPage(page.jobs, page.jobs[-1].job_id)
        return DeadPage(page.jobs + rest.jobs, rest.next)

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        done = await self.old.respawn(ns, queue, limit, ttl_ms)
        if done < limit:
            done += await self.new.respawn(ns, queue, limit - done, ttl_ms)
        return done

    async def respawn_one(self, ns: str, queue: str, job_id: str, ttl_ms: int, tries: int, delay_ms: int) -> None:
        await self._where_it_lives(lambda pool: pool.respawn_one(ns, queue, job_id, ttl_ms, tries, delay_ms))

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int:
        done = await self.old.delete_dead(ns, queue, limit)
        if done < limit:
            done += await self.new.delete_dead(ns, queue, limit - done)
        return done

    async def delete_dead_one(self, ns: str, queue: str, job_id: str) -> None:
        await self._where_it_lives(lambda pool: pool.delete_dead_one(ns, queue, job_id))

    # -- namespaces and the pool -----------------------------------------------------------

    async def namespaces(self) -> list[str]:
        return sorted(set(await self.old.namespaces()) | set(await self.new.namespaces()))

    async def queues(self, ns: str) -> list[str]:
        return sorted(set(await self.old.queues(ns)) | set(await self.new.queues(ns)))

    async def timer_size(self, ns: str) -> int:
        return await self.old.timer_size(ns) + await self.new.timer_size(ns)

    async def purge_namespace(self, ns: str) -> int:
        return await self.old.purge_namespace(ns) + await self.new.purge_namespace(ns)

    # -- recurring jobs: registered in the new pool, fired by the pool that holds them --------

    async def put_schedule(self, ns: str, schedule: Schedule, cap: int = 0) -> tuple[bool, int]:
        created, first = await self.new.put_schedule(ns, schedule, cap)
        try:
            await self.old.delete_schedule(ns, schedule.queue, schedule.name)
            created = False  # it replaced the old pool's
        except NotFound:
            pass
        return created, first

    async def schedules(self, ns: str, queue: str | None = None) -> list[ScheduleState]:
        found = {(s.schedule.queue, s.schedule.name): s for s in await self.old.schedules(ns, queue)}
        found.update({(s.schedule.queue, s.schedule.name): s for s in await self.new.schedules(ns, queue)})
        return [found[key] for key in sorted(found)]

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState:
        try:
            return await self.new.schedule(ns, queue, name)
        except NotFound:
            return await self.old.schedule(ns, queue, name)

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None:
        deleted = 0
        for engine in (self.old, self.new):
            try:
                await engine.delete_schedule(ns, queue, name)
                deleted += 1
            except NotFound:
                pass
        if not deleted:
            raise NotFound("schedule not found")

    async def ping(self) -> None:
        await self.old.ping()
        await self.new.ping()

    @property
    def stopping(self) -> bool:
        return self.new.stopping  # its long-polls wait on the new pool's wake lists

    async def stop_waiting(self) -> None:
        # Both, so no wait of either pool lingers.
        await self.old.stop_waiting()
        await self.new.stop_waiting()


async def _reserve_first(
    engines: Sequence[Source], ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool
) -> tuple[Source, list[Job]]:
    """The first engine with jobs and its jobs; the last engine and [] when none has any."""
    for engine in engines:
        jobs = await engine.reserve(ns, queues, ttr_ms, count, frozen)
        if jobs:
            return engine, jobs
    return engines[-1], []
