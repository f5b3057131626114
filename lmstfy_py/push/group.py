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
from collections import defaultdict

import aiohttp

from lmstfy_py import metrics, tasks
from lmstfy_py.admin.pushers import GroupKey, Pusher
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.push import delivery, shown
from lmstfy_py.store.faults import outage_reason
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import Job, PusherWait

log = logging.getLogger(__name__)

# An idle group costs one consume and one BRPOP per this, per process; a job still comes at once
# (a wake-up ends the wait), and a wake-up lost with a crashed process delays a push this long at most.
LONG_POLL_MS = 30_000
RESERVE_MARGIN_S = 2
MAX_BATCH = 100  # what one consume may take
STOP_GRACE_S = 2.0  # deliveries in flight at a stop get this long; the others come back after their ttr
REASONS = {delivery.NOT_ALLOWED: "address not allowed"}  # a failed delivery's outcome in its last_error


class Acks:
    """The ACKs of one group's delivered jobs, sent together: those of the deliveries that end in
    one turn of the event loop, or while the previous batch is on its way, go as one ack_many per
    queue. Until then the jobs stay reserved in Redis (nothing is held only here): a crash means
    they are pushed again after their reservation, as any un-ACKed delivery."""

    def __init__(self, store: JobStore, ns: str) -> None:
        self.store = store
        self.ns = ns
        self.pending: dict[str, list[str]] = defaultdict(list)
        self.sending: asyncio.Task[None] | None = None

    def add(self, queue: str, job_id: str) -> None:
        self.pending[queue].append(job_id)
        if self.sending is None:
            self.sending = asyncio.create_task(self._send(), name=f"push acks {self.ns}")

    async def drain(self) -> None:
        if self.sending is not None:
            await self.sending

    async def _send(self) -> None:
        try:
            while self.pending:
                await asyncio.sleep(0)  # the deliveries ending in this turn join the batch
                batch, self.pending = self.pending, defaultdict(list)
                for queue, job_ids in batch.items():
                    await self._ack(queue, job_ids)
        finally:
            self.sending = None

    async def _ack(self, queue: str, job_ids: list[str]) -> None:
        try:
            await self.store.ack_many(self.ns, queue, job_ids)
        except Exception as exc:
            if outage_reason(exc) is None:
                log.exception("ACK of %d pushed jobs of %s/%s failed", len(job_ids), self.ns, queue)
            else:  # Redis away: the jobs come back after their reservation; the health check says so
                log.debug("ACK of %d pushed jobs: %r", len(job_ids), exc)


class PushGroup:
    def __init__(self, key: GroupKey, pusher: Pusher, store: JobStore, session: aiohttp.ClientSession) -> None:
        self.pool, self.ns, self.name = key
        self._pusher = pusher
        self._changed = asyncio.Event()
        self.store = store
        self.session = session
        self.deliveries: set[asyncio.Task[None]] = set()
        self.acks = Acks(store, self.ns)
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
        await self.acks.drain()

    async def _step(self) -> float:
        self._changed.clear()
        pusher = self.pusher
        free = pusher.workers - len(self.deliveries)
        if free <= 0:
            await asyncio.wait(self.deliveries, return_when=asyncio.FIRST_COMPLETED)
            return 0
        started = time.monotonic()
        ttr_ms = (pusher.timeout + RESERVE_MARGIN_S) * 1000
        waiting = PusherWait(self._changed, recheck_s=LONG_POLL_MS / 1000)
        jobs = await self.store.consume(self.ns, pusher.queues, ttr_ms, LONG_POLL_MS, min(free, MAX_BATCH), waiting)
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
        if outcome.startswith("2") and len(outcome) == 3:
            self.acks.add(job.queue, job.job_id)
            return
        try:
            await self._failed(job, pusher, outcome)
        except (NotFound, Conflict):
            pass  # expired meanwhile, or its reservation ended and it was taken again
        except Exception as exc:
            if outage_reason(exc) is None:
                raise
            # Redis away: the job's reservation ends and it is pushed again; the health check says so.
            log.debug("push %s: %r", job.job_id, exc)

    async def _failed(self, job: Job, pusher: Pusher, outcome: str) -> None:
        # Every holder of the namespace's token reads last_error: the endpoint's credentials stay out.
        said = f"HTTP {outcome}" if outcome.isdigit() else REASONS.get(outcome, outcome)
        reason = f"{shown.REASON_PREFIX}{shown.endpoint(pusher.endpoint)}: {said}"
        if pusher.max_attempts and job.attempts >= pusher.max_attempts:
            await self.store.bury(self.ns, job.queue, job.job_id, reason)
            return
        delay_ms = pusher.backoff.delay_ms(job.attempts) if pusher.backoff else pusher.timeout * 1000
        await self.store.release(self.ns, job.queue, job.job_id, delay_ms, reason)
