"""An Engine's operations on a queue as a whole (a part of Engine, store/engine.py): looking at
it (peek, the next jobs, size, stats), whether a job id is taken, pausing and emptying it. A pool
serving another layout too (Engine.layout) answers for its lists as well."""

from __future__ import annotations

from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys, replies
from lmstfy_py.store.contracts import jobs as contract
from lmstfy_py.store.dead_letter import DeadLetterOps
from lmstfy_py.store.engine_base import PEEK_SCAN, ttl_seconds
from lmstfy_py.store.flow import FlowOps
from lmstfy_py.store.jobdata import decode_data
from lmstfy_py.types import Job, JobInfo, QueueStats


class QueueOps(DeadLetterOps, FlowOps):
    async def peek_queue(self, ns: str, queue: str) -> Job:
        if self.layout is not None and (ahead := await self.layout.ready_ahead(ns, queue, 1)):
            return ahead[0].job
        call_keys = contract.QueueKeys(keys.ready(ns, queue), keys.priority(ns, queue))
        found = await self.scripts.peek(
            self.script_client, call_keys, contract.PeekArgs(keys.job(ns, queue, ""), PEEK_SCAN)
        )
        if found is None:
            raise NotFound("the queue is empty")
        body, attributes, trace = decode_data(found.data)
        job_id, pttl = found.job_id.decode(), ttl_seconds(found.pttl)
        return Job(ns, queue, job_id, body, pttl, found.tries, attributes, trace=trace)

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """The next `limit` ready jobs, in the order consumes would get them; consumes nothing.

        A paused queue's are listed too (they are delivered in this order once it is resumed).
        Jobs whose data expired are skipped. The script looks at `limit` + PEEK_SCAN elements of
        the priority set and as many of the ready list at most: past PEEK_SCAN expired jobs
        there, fewer jobs than there are are listed (never out of order).
        """
        ahead = await self.layout.ready_ahead(ns, queue, limit) if self.layout is not None and limit > 0 else []
        limit -= len(ahead)
        if limit <= 0:
            return ahead
        call_keys = contract.QueueKeys(keys.ready(ns, queue), keys.priority(ns, queue))
        args = contract.NextArgs(keys.job(ns, queue, ""), limit, limit + PEEK_SCAN)
        return ahead + [
            replies.ready_job(ns, queue, j) for j in await self.scripts.next_jobs(self.script_client, call_keys, args)
        ]

    async def size(self, ns: str, queue: str) -> int:
        """Ready jobs, of any priority."""
        call_keys = contract.QueueKeys(keys.ready(ns, queue), keys.priority(ns, queue))
        ready = await self.scripts.size(self.script_client, call_keys, contract.NoArgs())
        return ready if self.layout is None else ready + await self.layout.ready_count(ns, queue)

    async def stats(self, ns: str, queue: str) -> QueueStats:
        await self._adopt_dead(ns, queue)
        call_keys = contract.StatsKeys(
            keys.ready(ns, queue), keys.priority(ns, queue), keys.dead(ns, queue), keys.meta(ns, queue)
        )
        counts = await self.scripts.stats(self.script_client, call_keys, contract.StatsArgs(keys.job(ns, queue, "")))
        ready = counts.ready if self.layout is None else counts.ready + await self.layout.ready_count(ns, queue)
        due = await self.due_buckets(ns, queue, counts.delayed)
        oldest = replies.oldest_ready_ms(counts) if ready else None
        return QueueStats(ready, counts.delayed, counts.reserved, counts.dead, bool(counts.paused), oldest, due)

    async def id_taken(self, ns: str, queue: str, job_id: str) -> bool:
        """Whether a publish with this job id would be a duplicate here: its job lives, or its unique_for lasts."""
        found = await self.redis.exists(keys.job(ns, queue, job_id), keys.tombstone(ns, queue, job_id))
        return bool(found) or (self.layout is not None and await self.layout.id_taken(ns, queue, job_id))

    async def pause(self, ns: str, queue: str, paused: bool) -> None:
        """Stops (or resumes) delivering the queue's jobs; publishes and timers go on."""
        call_keys = contract.PauseKeys(
            keys.meta(ns, queue), keys.ready(ns, queue), keys.priority(ns, queue), keys.wake(ns, queue)
        )
        await self.scripts.pause(self.script_client, call_keys, contract.PauseArgs("1" if paused else "0"))

    async def destroy(self, ns: str, queue: str) -> int:
        """Drops every ready job of the queue with its data; returns how many jobs were dropped."""
        dropped = await self.layout.drop_queue(ns, queue) if self.layout is not None else 0
        return dropped + await self._destroy_ours(ns, queue)
