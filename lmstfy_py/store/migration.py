"""Serving a pool that is being migrated to another one (`migrate_to` in its config).

lmstfy's migration engine, with the same rules: new jobs go to the new pool, consumers drain
the old pool first, and whatever names a job or a queue looks in both:

| operation                 | old pool | new pool                                               |
|---------------------------|----------|--------------------------------------------------------|
| publish, bulk publish     | -        | all new jobs                                           |
| republish (ACK + publish) | ACK      | publish (and ACK, should the job live there)           |
| consume                   | first, never waiting | then, long-polling; see below              |
| ack                       | yes      | yes                                                    |
| peek queue, peek job      | first    | when the old pool has nothing                          |
| size, dead-letter size    | summed   | summed                                                 |
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

A MigrationEngine is an Engine (a subclass, so callers need not know) that overrides every
public method; tests/store/test_migration.py runs each of them on a job of each pool.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from lmstfy_py.errors import NotFound
from lmstfy_py.store.engine import Engine, PumpResult
from lmstfy_py.types import DeadLetterHead, Job, NewJob

MIGRATION_SLICE_S = 0.5


class MigrationEngine(Engine):
    def __init__(self, old: Engine, new: Engine) -> None:
        # Tokens and limits of a migrating admin pool stay where they were: `redis` is the old pool's.
        super().__init__(old.pool, old.redis, new.blocking, scripts=old.scripts, script_client=old.script_client)
        self.old = old
        self.new = new

    # -- publish ---------------------------------------------------------------

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> str:
        return (await self.publish_many(ns, queue, [job], replaces))[0]

    async def publish_many(self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None) -> list[str]:
        job_ids = await self.new.publish_many(ns, queue, jobs, replaces)
        if replaces:
            # After the publish: a crash in between redelivers the old job rather than losing the new one.
            await self.old.ack(ns, queue, replaces)
        return job_ids

    # -- consume ---------------------------------------------------------------

    async def consume(self, ns: str, queues: Sequence[str], ttr_ms: int, timeout_ms: int, count: int) -> list[Job]:
        deadline = time.monotonic() + timeout_ms / 1000
        engines = (self.old, self.new)
        while True:
            source, jobs = await _reserve_first(engines, ns, queues, ttr_ms, count)
            left = deadline - time.monotonic()
            if jobs or left <= 0 or self.new.stopping:
                # Counted by the pool that held the jobs, as its own consumes are.
                source.observer.consumed(source.pool, ns, queues, count, jobs)
                return jobs
            await self.new._wait_for_wake(ns, queues, min(left, MIGRATION_SLICE_S))
            engines = (self.new, self.old)

    async def reserve(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int) -> list[Job]:
        return (await _reserve_first((self.old, self.new), ns, queues, ttr_ms, count))[1]

    # -- ack, peek, size -------------------------------------------------------

    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        acked_old = await self.old.ack(ns, queue, job_id)
        return await self.new.ack(ns, queue, job_id) or acked_old

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        # A job lives in one pool only: the counts add up.
        return await self.old.ack_many(ns, queue, job_ids) + await self.new.ack_many(ns, queue, job_ids)

    async def peek_queue(self, ns: str, queue: str) -> Job:
        try:
            return await self.old.peek_queue(ns, queue)
        except NotFound:
            return await self.new.peek_queue(ns, queue)

    async def peek_job(self, ns: str, queue: str, job_id: str) -> Job:
        try:
            return await self.old.peek_job(ns, queue, job_id)
        except NotFound:
            return await self.new.peek_job(ns, queue, job_id)

    async def size(self, ns: str, queue: str) -> int:
        return await self.old.size(ns, queue) + await self.new.size(ns, queue)

    async def timer_size(self, ns: str) -> int:
        return await self.old.timer_size(ns) + await self.new.timer_size(ns)

    async def destroy(self, ns: str, queue: str) -> int:
        return await self.old.destroy(ns, queue) + await self.new.destroy(ns, queue)

    # -- dead letter -----------------------------------------------------------

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

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        done = await self.old.respawn(ns, queue, limit, ttl_ms)
        if done < limit:
            done += await self.new.respawn(ns, queue, limit - done, ttl_ms)
        return done

    async def bury(self, ns: str, queue: str, limit: int) -> int:
        done = await self.old.bury(ns, queue, limit)
        if done < limit:
            done += await self.new.bury(ns, queue, limit - done)
        return done

    # -- registry and pump -----------------------------------------------------

    async def namespaces(self) -> list[str]:
        return sorted(set(await self.old.namespaces()) | set(await self.new.namespaces()))

    async def queues(self, ns: str) -> list[str]:
        return sorted(set(await self.old.queues(ns)) | set(await self.new.queues(ns)))

    async def purge_namespace(self, ns: str) -> int:
        return await self.old.purge_namespace(ns) + await self.new.purge_namespace(ns)

    async def pump(self, ns: str, now: int) -> PumpResult:
        # The pumps run on each pool's own Engine; this is here for completeness.
        old, new = await self.old.pump(ns, now), await self.new.pump(ns, now)
        return PumpResult(
            old.to_ready + new.to_ready, old.to_dead + new.to_dead, _earliest(old.next_due_ms, new.next_due_ms)
        )

    async def timer_head(self, ns: str) -> int:
        return _earliest(await self.old.timer_head(ns), await self.new.timer_head(ns))

    @property
    def stopping(self) -> bool:
        # Its long-polls wait on the new pool's wake hub; the one Engine.__init__ built is unused.
        return self.new.stopping

    async def stop_waiting(self) -> None:
        # Its long-polls wait on the new pool's wake lists; both, so no wait of either pool lingers.
        await self.old.stop_waiting()
        await self.new.stop_waiting()

    async def queue_exists(self, ns: str, queue: str) -> bool:
        return await self.old.queue_exists(ns, queue) or await self.new.queue_exists(ns, queue)

    async def ping(self) -> None:
        await self.old.ping()
        await self.new.ping()

    async def close(self) -> None:
        """Nothing of its own to close: Pools closes both pools' engines."""


async def _reserve_first(
    engines: Sequence[Engine], ns: str, queues: Sequence[str], ttr_ms: int, count: int
) -> tuple[Engine, list[Job]]:
    """The first engine with jobs and its jobs; the last engine and [] when none has any."""
    for engine in engines:
        jobs = await engine.reserve(ns, queues, ttr_ms, count)
        if jobs:
            return engine, jobs
    return engines[-1], []


def _earliest(first_ms: int, second_ms: int) -> int:
    """The earlier of two due times, -1 meaning none."""
    due = [ms for ms in (first_ms, second_ms) if ms != -1]
    return min(due, default=-1)
