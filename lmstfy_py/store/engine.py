"""One Engine per pool: every job operation of the data plane on one Redis deployment.

The engine decides; the Lua scripts are the only code that moves a job between states. Times
are milliseconds; the web layer converts lmstfy's seconds. Redis errors propagate as redis-py
exceptions and the web layer answers them with 503. Everything an Engine needs comes in through
its constructor (clients, scripts, the observer that counts, the signal that wakes its pool's
timer pump), wired in Runtime.start (store/engine_base.py).

The Engine is the only code that publishes, consumes, ACKs, releases, peeks, pumps and kills
jobs. A pool whose Redis also holds another layout (lmstfy's) is served by an Engine with a
Layout (store/layout.py) that it consults at a few points; the operations are parted by concern:
here publish (handing a job ready now to a consume of this process waiting for it,
store/handover.py) and consume; looking at a queue, pausing and emptying it in queue_ops.py; a
worker's verbs on its reservation in verbs.py; the dead letter in dead_letter.py; namespaces,
purge, the pump and recurring jobs in namespace_ops.py; settings, complete and result in
outcomes.py; promote and the groups in flow.py. Each step on a job whose trace is sampled is
told to the observer (EngineBase.traced, SPEC 15).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from lmstfy_py.store import keys, replies
from lmstfy_py.store.contracts import jobs as contract
from lmstfy_py.store.engine_base import (
    CHUNK,
    LOWER_DUE,
    PEEK_SCAN,
    WAIT_SLICE_S,
    EngineObserver,
    PumpResult,
    TimerSignal,
    TracedJob,
    TracedStep,
    ack_call,
    job_prefix,
    now_ms,
    publish_keys,
    queue_keys,
    reserve_keys,
    ttl_seconds,
)
from lmstfy_py.store.events import EventOps
from lmstfy_py.store.handover import Mailbox
from lmstfy_py.store.jobdata import encode_data, new_job_id, stored_trace, trace_field
from lmstfy_py.store.layout import Layout
from lmstfy_py.store.long_poll import long_poll
from lmstfy_py.store.namespace_ops import NamespaceOps
from lmstfy_py.store.outcomes import OutcomeOps
from lmstfy_py.store.queue_ops import QueueOps
from lmstfy_py.store.scripts import ScriptCall, run_pipeline
from lmstfy_py.store.verbs import VerbOps, acked_traces
from lmstfy_py.types import Job, NewJob, Published, PusherWait

# Of engine_base.py, answered here too: what callers of an Engine import with it.
__all__ = [
    "CHUNK",
    "PEEK_SCAN",
    "WAIT_SLICE_S",
    "Engine",
    "EngineObserver",
    "PumpResult",
    "TimerSignal",
    "TracedStep",
    "now_ms",
]
__all__ += ["ttl_seconds"]


async def _none() -> list[Job]:
    return []


class Engine(VerbOps, QueueOps, NamespaceOps, OutcomeOps, EventOps):
    """The JobStore (store/jobstore.py) of one pool."""

    def with_layout(self, layout: Layout) -> Engine:
        """This pool's Engine serving `layout` too; sharing its clients, registry and wake-ups
        (the pumps, health checks and metrics keep to the pool's own Engine)."""
        served = copy.copy(self)
        served.layout = layout
        return served

    # -- publish ---------------------------------------------------------------------------

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> Published:
        """Publishes one job; with `replaces`, ACKs that job in the same atomic step."""
        return (await self.publish_many(ns, queue, [job], replaces))[0]

    async def publish_many(
        self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None
    ) -> list[Published]:
        await self._register(ns)
        now = time.time_ns() // 1_000_000  # now_ms()'s sum, made here: every publish asks
        # This process's consumes waiting on the queue alone (store/handover.py), one per job
        # ready now, which its step hands the job to. A layout's consume looks at its lists first.
        handover = self.handover
        claimed = handover.claim(ns, len(jobs), queue) if ns in handover.by_namespace and self.layout is None else []
        job_ids, calls, earliest, named = self._publish_calls(ns, queue, jobs, now, replaces, claimed)
        waiters: list[Mailbox] = []  # those the steps name: the first claimed, in order
        if claimed:
            waiters = [waiter for waiter in named if waiter is not None]
            handover.unclaim(claimed[len(waiters) :])
        # A handover's reservations go on the timer at their ttr: the index learns it, as a reserve's.
        reserved_due = now + min(mailbox.ttr_ms for mailbox in waiters) if waiters else 0
        indexed = min(due for due in (earliest, reserved_due) if due) if earliest or reserved_due else 0
        start_ns = time.time_ns()
        try:
            replies = await run_pipeline(self.script_client, calls, [(*LOWER_DUE, indexed, ns)] if indexed else [])
        except BaseException:
            handover.unclaim(waiters)
            raise
        parse = self.scripts.publish.parse
        answers: list[Published] = []
        stored: list[NewJob] = []  # the jobs created
        made: list[TracedJob] = []
        acked: list[TracedJob] = []
        handed: list[contract.ReserveReply | None] = []  # by waiter, in order
        expiry = 0  # the earliest end of a job with a keep and a ttl, 0 for none
        # zip stops at the jobs: the index update's reply, when sent, comes after theirs.
        for job, job_id, reply, waiter in zip(jobs, job_ids, replies, named, strict=False):
            outcome = parse(reply)
            created = outcome.status > 0
            answers.append(Published(job_id, created))
            if created:
                stored.append(job)
                made.append((queue, job_id, job.trace))
            if replaces and outcome.replaced is not None:  # its ACK, in the same step
                acked.append((queue, replaces, stored_trace(outcome.replaced)))
            # 2: the job has a keep and a ttl, which ends it as expired (lua/_lib.lua set_ttl): the pump is told.
            if outcome.status == 2 and (not expiry or now + job.ttl_ms < expiry):
                expiry = now + job.ttl_ms
            if waiter is not None:
                handed.append(outcome.handed)
        self.traced("ack", ns, start_ns, acked)
        self.traced("publish", ns, start_ns, made)
        if earliest:
            self.timers.scheduled(earliest)
        if waiters:
            await self._handed(ns, waiters, handed, reserved_due, start_ns)
        if expiry:
            await self._scheduled(ns, expiry)
        self.observer.published(self.pool, ns, queue, stored, replaces)
        if replaces and self.layout is not None:
            await self.layout.acked(ns, queue, [replaces])
        return answers

    async def _register(self, ns: str) -> None:
        """register_namespace, its test made here: every publish asks, and mostly needs nothing."""
        if self._registered.get(ns, 0.0) <= time.monotonic():
            await self.register_namespace(ns)

    def _publish_calls(
        self, ns: str, queue: str, jobs: Sequence[NewJob], now: int, replaces: str | None, waiters: Sequence[Mailbox]
    ) -> tuple[list[str], list[ScriptCall], int, list[Mailbox | None]]:
        """Each job's id and step; the earliest due time among the delayed jobs (0: none); the
        waiter each step names: the first jobs ready now name one each, before any of the
        publish's wake tokens is there (each step that hands its job over takes its token away)."""
        job_ids: list[str] = []
        calls: list[ScriptCall] = []
        named: list[Mailbox | None] = []
        earliest = 0
        handing = iter(waiters)
        # One pass per job, before and after the step: a publish is one job, and each list
        # comprehension over it cost a frame of its own.
        for job in jobs:
            # A delay already past (a due time the caller counted down before this call) is none.
            delay_ms = job.delay_ms if job.delay_ms > 0 else 0
            job_id = job.job_id or new_job_id(delay_ms // 1000, 0 if job.attributes is None else 1, now)
            job_ids.append(job_id)
            waiter = None if delay_ms or not waiters else next(handing, None)
            named.append(waiter)
            calls.append(self._publish_call(ns, queue, job, job_id, now, replaces, waiter))
            if delay_ms and (not earliest or now + delay_ms < earliest):
                earliest = now + delay_ms
        return job_ids, calls, earliest, named

    async def _handed(
        self,
        ns: str,
        waiters: list[Mailbox],
        handed: list[contract.ReserveReply | None],
        reserved_due: int,
        start_ns: int,
    ) -> None:
        """What the publish's steps reserved for their waiters, delivered (NamespaceOps._hand_over)."""
        jobs = [reply.jobs if reply else [] for reply in handed]
        if any(jobs):
            self.timers.scheduled(reserved_due)
        await self._hand_over(ns, waiters, jobs, start_ns)
        # A queue held back by its rate: its wake-up member is on the timer (SPEC 14).
        wake_at = min((reply.wake_at for reply in handed if reply and reply.wake_at), default=0)
        if wake_at:
            await self._scheduled(ns, wake_at)

    def _publish_call(
        self, ns: str, queue: str, job: NewJob, job_id: str, now: int, replaces: str | None, waiter: Mailbox | None
    ) -> ScriptCall:
        timer, registry, jobs_prefix, tombstones_prefix, queue_part = publish_keys(ns, queue)
        job_key, tombstone = jobs_prefix + job_id, tombstones_prefix + job_id
        replaced = (jobs_prefix + replaces,) if replaces else ()
        call_keys = contract.PublishKeys(job_key, timer, registry, tombstone, *queue_part, replaced)
        due = now + job.delay_ms if job.delay_ms > 0 else 0
        data, backoff = encode_data(job.body, job.attributes, job.trace), job.backoff.spec() if job.backoff else ""
        # A job id the engine made tells when the job was created (ids.timestamp_ms): no field c is kept.
        created = now if job.job_id else 0
        keep = "" if job.keep_s is None else job.keep_s  # "": the queue's keep, read by the step itself
        fields = (data, job.ttl_ms, due, job.tries, ns, queue, job_id, created, job.priority, job.unique_for_ms)
        trace = trace_field(job.trace)
        handing = (now + waiter.ttr_ms, waiter.count, "1" if waiter.frozen else "0") if waiter else (0, 0, "0")
        replaced_ids = (replaces,) if replaces else ()
        args = contract.PublishArgs(*fields, backoff, keep, job.group or "", trace, *handing, replaced_ids)
        return self.scripts.publish.call(call_keys, args)

    # -- consume ---------------------------------------------------------------------------

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
        """Reserves up to `count` jobs, the queues listed first winning; long-polls up to timeout_ms,
        looking at the queues without a wake-up every WAIT_SLICE_S (a wake token may be lost with a
        crashed process). A pusher's consume differs as `pusher` says (types.PusherWait). `acks`
        (queue -> ids) are ACKed first, in the first reserve's pipeline: one round trip (with
        appendfsync always, one fsync: an ACK before it waited for its own; docs/PERFORMANCE.md)."""
        recheck_s = pusher.recheck_s if pusher else None
        frozen = pusher is not None
        carried = acks if self.layout is None else None  # with the first attempt's reserve
        if acks and self.layout is not None:  # a layout's ACK has a step of its own (layout.acked)
            for queue, job_ids in acks.items():
                await self.ack_many(ns, queue, job_ids)
        if timeout_ms <= 0:  # one attempt, as long_poll would make it, without its loop and closures
            jobs = await self._attempt(ns, queues, ttr_ms, count, frozen, None, carried)
            self.observer.consumed(self.pool, ns, queues, count, jobs)
            return jobs
        # A layout's consume looks at its lists first: the pump's handover would skip them.
        mailbox = Mailbox(queues, ttr_ms, count, frozen) if self.layout is None else None
        # Another consume of this process already waits on this queue alone: the queue was empty
        # when it looked, and a job ready since has woken one of them (its wake token) or been
        # handed over. This one waits behind it at once: a first reserve would find nothing.
        waits_first = mailbox is not None and not carried and not frozen and self.handover.waits_on(ns, queues)
        try:
            jobs = await long_poll(
                lambda waited: (
                    _none()
                    if waits_first and not waited
                    else self._attempt(ns, queues, ttr_ms, count, frozen, mailbox, None if waited else carried)
                ),
                lambda left: self._wait(ns, queues, min(left, self._slice_s(recheck_s)), mailbox),
                timeout_ms,
                lambda: self.stopping,
                pusher.interrupt if pusher else None,
            )
        finally:
            if mailbox is not None and (handed := self.handover.leave(ns, mailbox)):
                await self._give_back(ns, handed, frozen)
        self.observer.consumed(self.pool, ns, queues, count, jobs)
        return jobs

    async def _attempt(
        self,
        ns: str,
        queues: Sequence[str],
        ttr_ms: int,
        count: int,
        frozen: bool,
        mailbox: Mailbox | None,
        acks: Mapping[str, Sequence[str]] | None,
    ) -> list[Job]:
        if acks:  # only the first attempt carries them (nothing can be in the mailbox yet)
            jobs = await self.run_reserve(*self._reserve_step(ns, queues), ns, queues, ttr_ms, count, frozen, acks)
            for queue, job_ids in acks.items():
                self._count_acks(ns, queue, job_ids)
            return jobs
        if mailbox is not None:
            mailbox.waiting = False
            if mailbox.jobs:
                return mailbox.take()
        return await self.reserve(ns, queues, ttr_ms, count, frozen)

    async def _wait(self, ns: str, queues: Sequence[str], seconds: float, mailbox: Mailbox | None) -> None:
        """Until a wake token, or jobs the pump hands over (store/handover.py)."""
        if mailbox is None:
            await self.wait_for_wake(ns, queues, seconds)
            return
        if mailbox.jobs:  # handed over while its last attempt ran
            return
        self.handover.join(ns, mailbox)
        mailbox.woken = asyncio.get_running_loop().create_future()
        try:
            await self.wait_for_wake(ns, queues, seconds, mailbox.woken, mailbox)
        finally:
            mailbox.woken = None

    async def _give_back(self, ns: str, jobs: Sequence[Job], frozen: bool) -> None:
        """Jobs handed to a consume that left before answering them: ready again at once. The
        worker never saw them, so the try and the attempt go back too (untried), but for a
        pusher's (frozen: it took no try). Should this fail, their ttr gives them back."""
        for job in jobs:
            await self.release(ns, job.queue, job.job_id, 0 if frozen else None, "", untried=not frozen)

    def _slice_s(self, recheck_s: float | None) -> float:
        return (recheck_s or WAIT_SLICE_S) if self.layout is None else self.layout.wait_slice_s(recheck_s)

    async def reserve(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool = False) -> list[Job]:
        if self.layout is not None and (jobs := await self.layout.reserve_first(ns, queues, ttr_ms, count, frozen)):
            return jobs
        return await self.run_reserve(*self._reserve_step(ns, queues), ns, queues, ttr_ms, count, frozen)

    def _reserve_step(self, ns: str, queues: Sequence[str]) -> tuple[contract.ReserveStep, contract.ReserveKeys]:
        if len(queues) == 1:  # most consumes: one lookup, where the join below costs a frame per key
            return self.scripts.reserve, reserve_keys(ns, queues[0])
        per_queue = tuple(key for queue in queues for key in queue_keys(ns, queue))
        return self.scripts.reserve, contract.ReserveKeys(keys.timer(ns), per_queue)

    async def run_reserve(
        self,
        step: contract.ReserveStep,
        call_keys: contract.ReserveKeys,
        ns: str,
        queues: Sequence[str],
        ttr_ms: int,
        count: int,
        frozen: bool,
        acks: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Job]:
        """Runs reserve.lua, or a script answering as it does (lmstfy_reserve.lua), with its
        due-index update in the same round trip; `acks` (queue -> ids) are ACKed first in it."""
        due = now_ms() + ttr_ms
        args = contract.ReserveArgs(due, count, ns, job_prefix(ns), "1" if frozen else "0", tuple(queues))
        acked = list(acks.items()) if acks else []
        before = [self.scripts.ack.call(*ack_call(ns, queue, job_ids)) for queue, job_ids in acked] if acked else []
        start_ns = time.time_ns()
        answers = await run_pipeline(self.script_client, [*before, step.call(call_keys, args)], [(*LOWER_DUE, due, ns)])
        reserved, wake_at = step.parse(answers[len(before)])
        for (queue, _), answer in zip(acked, answers, strict=False):
            self.traced("ack", ns, start_ns, acked_traces(queue, self.scripts.ack.parse(answer)))
        jobs = [replies.reserved_job(ns, r) for r in reserved]
        self.traced_jobs("consume", ns, start_ns, jobs)
        if reserved:
            self.timers.scheduled(due)
        if wake_at:  # a queue held back by its rate: its wake-up member is on the timer (SPEC 14)
            await self._scheduled(ns, wake_at)
        return jobs

    async def wait_for_wake(
        self,
        ns: str,
        queues: Sequence[str],
        seconds: float,
        waiter: asyncio.Future[None] | None = None,
        mailbox: Mailbox | None = None,
    ) -> None:
        # Waits on the wake lists, never on the ready lists: a BRPOP that popped a job and
        # then lost its process would lose the job (lmstfy's bug). One BRPOP per queue set
        # is shared by every waiting request of this process (store/wake.py).
        await self.wake_hub.wait([keys.wake(ns, q) for q in queues], seconds, waiter, mailbox)

    @property
    def stopping(self) -> bool:
        """Set by stop_waiting(): long-polls answer at once instead of waiting."""
        return self.wake_hub.closed

    async def stop_waiting(self) -> None:
        """Ends every long-poll of this process now ("no job available"), and every result() wait (its
        job as it is now), and every event stream; the first step of a graceful stop."""
        await self.end_watch.close()
        await self.event_tail.close()
        await self.wake_hub.close()

    async def ping(self) -> None:
        """Raises unless the pool's Redis answers (every primary, for a cluster)."""
        if isinstance(self.redis, RedisCluster):
            await self.redis.ping(target_nodes=RedisCluster.PRIMARIES)
        else:
            await self.script_client.execute_command("PING")

    async def close(self) -> None:
        await self.end_watch.close()
        await self.event_tail.close()
        await self.wake_hub.close()
        clients: tuple[Any, ...] = (self.script_client, self.redis, self.blocking)
        for client in {id(client): client for client in clients}.values():
            await client.aclose()
