"""An Engine's job-outcome operations (a part of Engine, store/engine.py; SPEC 13): a queue's
settings, `complete` (an ACK that keeps a result), and `result` (a job's end, waited for).

A queue's settings are one hash (keys.settings) that the publish step reads itself when a
publish names no keep, so a change reaches every process at once. A job with a keep leaves a
record when it ends (lua/_lib.lua's finish); result() waiters learn of ends through store/ends.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from redis.exceptions import RedisError

from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys, replies
from lmstfy_py.store.contracts import jobs as contract
from lmstfy_py.store.engine_base import EngineBase, as_int, now_ms
from lmstfy_py.store.verbs import outcome_trace
from lmstfy_py.types import JobInfo, JobStateName, QueueSettings, SettingsChange

ENDED: frozenset[JobStateName] = frozenset({"completed", "dead", "expired", "deleted"})
RECHECK_S = 1.0  # a waiter reads its job again this often, in case its end was told while nobody listened
TOLD_S = 1.0  # how long a waiter that finds its job gone waits for the news of its end
# A queue's settings, as the settings hash names its fields (keys.settings), in QueueSettings' order.
SETTING_FIELDS = ("keep", "events", "max_reserved", "rate", "burst", "group_concurrency")
MARKER_MARGIN_MS = 5000  # a waiter's counter outlives its wait by this much (it is decremented when it leaves)


class OutcomeOps(EngineBase):
    async def queue_settings(self, ns: str, queue: str) -> QueueSettings:
        found = await self.redis.hmget(keys.settings(ns, queue), list(SETTING_FIELDS))
        keep, events, max_reserved, rate, burst, group_concurrency = found
        return QueueSettings(
            as_int(keep) or 0,
            as_int(events) or 0,
            as_int(max_reserved) or 0,
            float(rate) if rate else 0.0,
            as_int(burst) or None,
            as_int(group_concurrency) or 1,
        )

    async def set_queue_settings(self, ns: str, queue: str, change: SettingsChange) -> QueueSettings:
        """Sets those given (values already validated by the web layer); answers all of them."""
        given = (change.keep_s, change.events, change.max_reserved, change.rate, change.burst, change.group_concurrency)
        changes = [
            part
            for name, value in zip(SETTING_FIELDS, given, strict=True)
            if value is not None
            for part in (name, value)
        ]
        if changes:
            call_keys = contract.SettingsPutKeys(keys.settings(ns, queue), keys.events(ns, queue))
            await self.scripts.settings_put(self.script_client, call_keys, contract.SettingsPutArgs(tuple(changes)))
        return await self.queue_settings(ns, queue)

    async def complete(self, ns: str, queue: str, job_id: str, result: bytes) -> None:
        """ACK that keeps `result`: NotFound when there is no such job, Conflict when it is not reserved.

        A job lmstfy itself delivered (a pool with its layout) is only ACKed: it has no keep."""
        call_keys = contract.CompleteKeys(keys.job(ns, queue, job_id), keys.timer(ns), keys.meta(ns, queue))
        args, start_ns = contract.CompleteArgs(ns, queue, job_id, now_ms(), result), time.time_ns()
        outcome = await self.scripts.complete(self.script_client, call_keys, args)
        self.traced("complete", ns, start_ns, outcome_trace(queue, job_id, outcome))
        if outcome.status != b"missing" or self.layout is None or not await self.layout.acked(ns, queue, [job_id]):
            replies.checked(outcome)
        self.observer.acked(self.pool, ns, queue, job_id)

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo:
        """A job by id, whatever its state, with its state; or the record it left when it ended."""
        found = await self._job_state(ns, queue, job_id)
        if found is None:
            elsewhere = await self.layout.find(ns, queue, job_id) if self.layout is not None else None
            if elsewhere is None:
                raise NotFound("job not found")
            return elsewhere
        return found

    async def _job_state(self, ns: str, queue: str, job_id: str) -> JobInfo | None:
        found = await self.scripts.job_state(
            self.script_client,
            contract.VerbKeys(keys.job(ns, queue, job_id), keys.timer(ns)),
            contract.JobStateArgs(ns, queue, job_id),
        )
        return None if found is None else replies.job_info(ns, queue, job_id, found)

    async def result(self, ns: str, queue: str, job_id: str, wait_ms: int) -> tuple[bool, JobInfo]:
        """(ended, info) of a job, waiting up to wait_ms for its end (store/jobstore.py).

        A waiter subscribes and counts itself in the job's waiters counter BEFORE it reads the job
        again: an end after that read is told to it, one before it is read."""
        info = await self.peek_job(ns, queue, job_id)  # NotFound: unknown, or past its keep
        if info.state in ENDED or wait_ms <= 0 or self.end_watch.closed:
            return info.state in ENDED, info
        deadline = time.monotonic() + wait_ms / 1000
        marker = contract.WaitMarkKeys(keys.waiters(ns, queue, job_id))
        with self.end_watch.waiting(ns, queue, job_id) as waiter:
            await self.end_watch.subscribe(ns)
            ttl = wait_ms + MARKER_MARGIN_MS
            await self.scripts.wait_mark(self.script_client, marker, contract.WaitMarkArgs(1, ttl))
            try:
                return await self._await_end(ns, queue, job_id, deadline, waiter)
            finally:
                if not _told(waiter):  # the ending step that told it deleted the counter
                    with contextlib.suppress(RedisError):
                        await self.scripts.wait_mark(self.script_client, marker, contract.WaitMarkArgs(-1, ttl))

    async def _await_end(
        self, ns: str, queue: str, job_id: str, deadline: float, waiter: asyncio.Future[contract.JobState | None]
    ) -> tuple[bool, JobInfo]:
        while True:
            if waiter.done() and (told := waiter.result()) is not None:
                return True, replies.job_info(ns, queue, job_id, told)
            found = await self._job_state(ns, queue, job_id)
            if found is None and not waiter.done():
                # Gone: it ended with no keep, and its end, told to this waiter, is on its way (or
                # it lives in the pool's other layout, where peek_job finds it).
                await asyncio.wait([waiter], timeout=TOLD_S)
            if found is None:
                if waiter.done() and waiter.result() is not None:
                    continue
                return await self._peeked(ns, queue, job_id)
            left = deadline - time.monotonic()
            # Not waiter.done(): an end told while the read was on its way settles the waiter too,
            # and the loop's top answers it, not the state read just before that end.
            if found.state in ENDED or left <= 0 or self.end_watch.closed:
                return found.state in ENDED, found
            await asyncio.wait([waiter], timeout=min(left, RECHECK_S))

    async def _peeked(self, ns: str, queue: str, job_id: str) -> tuple[bool, JobInfo]:
        """The job as peek_job finds it (a pool's other layout included; NotFound when gone)."""
        info = await self.peek_job(ns, queue, job_id)
        return info.state in ENDED, info


def _told(waiter: asyncio.Future[contract.JobState | None]) -> bool:
    return waiter.done() and not waiter.cancelled() and waiter.result() is not None
