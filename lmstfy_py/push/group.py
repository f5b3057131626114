"""One push group in one server process: consume its queues, POST each job, ACK what was taken.

A tasks.Loop consumes, in turn, as many jobs as the group has free workers (the queues listed
first win), long-polling while there is nothing, and starts one delivery task per job, at most
`workers` at once (per process, as lmstfy runs `workers` per instance). A delivery answered 2xx
ACKs the job in its own queue. Any other outcome (a status, a timeout, an unreachable endpoint)
releases it, with the outcome as its last error, to come back after the group's backoff, or
after `timeout` seconds as lmstfy does; past `max_attempts` it goes to the dead letter instead.

The consume uses up no try (lmstfy's: a pushed job is retried until its ttl) and reserves the job
for `timeout` + RESERVE_MARGIN_S, so a POST that ends at its timeout is answered for (ACK or
release) before the reservation could lapse: two server processes never push one job twice, but
after a crash (the job comes back when its reservation ends). Nothing is held only in memory: a
job in delivery is reserved in Redis.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from lmstfy_py import metrics, tasks
from lmstfy_py.admin.pushers import GroupKey, Pusher
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.push import delivery
from lmstfy_py.store.faults import outage_reason
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import Job

log = logging.getLogger(__name__)

LONG_POLL_MS = 5000  # an idle group costs one consume per this, per process
RESERVE_MARGIN_S = 2
MAX_BATCH = 100  # what one consume may take
STOP_GRACE_S = 2.0  # deliveries in flight at a stop get this long; the others come back after their ttr


class PushGroup:
    def __init__(self, key: GroupKey, pusher: Pusher, store: JobStore, session: aiohttp.ClientSession) -> None:
        self.pool, self.ns, self.name = key
        self._pusher = pusher
        self._changed = asyncio.Event()
        self.store = store
        self.session = session
        self.deliveries: set[asyncio.Task[None]] = set()
        self.loop = tasks.Loop("push", self._step, "/".join(key))

    @property
    def pusher(self) -> Pusher:
        return self._pusher

    @pusher.setter
    def pusher(self, pusher: Pusher) -> None:
        """A new configuration: a long-poll on the old queues ends, the next POST goes by the new one."""
        if pusher != self._pusher:
            self._pusher = pusher
            self._changed.set()

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.cancel()  # its step mostly waits in a long-poll
        if self.deliveries:
            await asyncio.wait(self.deliveries, timeout=STOP_GRACE_S)
        for task in self.deliveries:
            task.cancel()

    async def _step(self) -> float:
        self._changed.clear()
        pusher = self.pusher
        free = pusher.workers - len(self.deliveries)
        if free <= 0:
            await asyncio.wait(self.deliveries, return_when=asyncio.FIRST_COMPLETED)
            return 0
        started = time.monotonic()
        ttr_ms = (pusher.timeout + RESERVE_MARGIN_S) * 1000
        jobs = await self.store.consume(
            self.ns, pusher.queues, ttr_ms, LONG_POLL_MS, min(free, MAX_BATCH), frozen=True, interrupt=self._changed
        )
        for queue in {job.queue for job in jobs}:
            metrics.push_consumed(self.pool, self.ns, queue, time.monotonic() - started)
        for job in jobs:
            task = asyncio.create_task(self._deliver(job, pusher.timeout), name=f"push {job.job_id}")
            self.deliveries.add(task)
            task.add_done_callback(self.deliveries.discard)
        return 0

    async def _deliver(self, job: Job, reserved_timeout: int) -> None:
        # The configuration of the moment (an endpoint changed is one that failed); but no POST
        # outlasts the reservation the job was taken with.
        pusher = self.pusher
        started = time.monotonic()
        timeout = min(pusher.timeout, reserved_timeout)
        outcome = await delivery.post(self.session, pusher.endpoint, job, pusher.secret, timeout)
        metrics.pushed(self.pool, self.ns, self.name, job.queue, outcome, time.monotonic() - started)
        try:
            if outcome.startswith("2") and len(outcome) == 3:
                await self.store.ack(self.ns, job.queue, job.job_id)
            else:
                await self._failed(job, pusher, outcome)
        except (NotFound, Conflict):
            pass  # expired meanwhile, or its reservation ended and it was taken again
        except Exception as exc:
            if outage_reason(exc) is None:
                raise
            # Redis away: the job's reservation ends and it is pushed again; the health check says so.
            log.debug("push %s: %r", job.job_id, exc)

    async def _failed(self, job: Job, pusher: Pusher, outcome: str) -> None:
        reason = f"push to {pusher.endpoint}: " + (f"HTTP {outcome}" if outcome.isdigit() else outcome)
        if pusher.max_attempts and job.attempts >= pusher.max_attempts:
            await self.store.bury(self.ns, job.queue, job.job_id, reason)
            return
        delay_ms = pusher.backoff.delay_ms(job.attempts) if pusher.backoff else pusher.timeout * 1000
        await self.store.release(self.ns, job.queue, job.job_id, delay_ms, reason)
