"""What every part of an Engine shares (store/engine.py): its wiring, the constants, the small
helpers and the types its operations answer. The operations live by concern in engine.py (publish,
consume, a job, a queue), dead_letter.py and namespace_ops.py.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from lmstfy_py.store import keys
from lmstfy_py.store.contracts import Scripts
from lmstfy_py.store.contracts.jobs import AckArgs, AckKeys, ReserveKeys
from lmstfy_py.store.contracts.upkeep import DestroyArgs, DestroyKeys
from lmstfy_py.store.ends import EndWatch
from lmstfy_py.store.event_tail import EventTail
from lmstfy_py.store.handover import Handover
from lmstfy_py.store.layout import Layout
from lmstfy_py.store.scripts import Command, ScriptClient
from lmstfy_py.store.wake import WakeHub
from lmstfy_py.types import Job, NewJob, TraceContext

PEEK_SCAN = 50  # ready elements peek looks past when their jobs expired
CHUNK = 1000  # elements one destroy/respawn/delete/pump call handles, so Redis never blocks long
WAIT_SLICE_S = 5.0  # a long-poll re-checks at least this often, in case a wake token was lost with a crashed process
# A namespace purged by another process is registered again by this one's publishes within this time.
REGISTER_EVERY_S = 10.0

RedisClient = Redis | RedisCluster


# The command that lowers a namespace's entry in the due index (the pump's sweep reads it), before
# its (due_ms, ns): `(*LOWER_DUE, due_ms, ns)`. A prefix, not a function: a delayed job's publish
# and every reserve send it, and the call cost them more than the tuple.
LOWER_DUE: Command = ("ZADD", keys.DUE_INDEX, "LT")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ttl_seconds(pttl_ms: int) -> int:
    """Seconds a job has left, rounded up so that only "no expiry" reads as 0."""
    return 0 if pttl_ms < 0 else (pttl_ms + 999) // 1000


def as_int(value: Any) -> int | None:
    """A number a script returned, None for an absent field (false, which arrives as None)."""
    return None if value is None else int(value)


def as_text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode("utf-8", "replace")


# Built once per queue rather than per request (the same strings for every job of a queue); bounded so
# that clients naming endless queues cannot grow it.
@functools.lru_cache(maxsize=4096)
def queue_keys(ns: str, queue: str) -> tuple[str, str, str, str]:
    """A queue's ready list, priority set, wake list and meta hash, as the scripts take them."""
    return keys.ready(ns, queue), keys.priority(ns, queue), keys.wake(ns, queue), keys.meta(ns, queue)


@functools.lru_cache(maxsize=4096)
def publish_keys(ns: str, queue: str) -> tuple[str, str, str, str, tuple[str, str, str, str, str, str]]:
    """The keys of a publish that do not depend on the job: timer, registry, the prefixes of the
    queue's job and tombstone keys (keys.job's and keys.tombstone's), and the queue's (its settings last)."""
    ready, priority, wake, meta = queue_keys(ns, queue)
    own = (ready, priority, wake, meta, keys.dead(ns, queue), keys.settings(ns, queue))
    return keys.timer(ns), keys.queues(ns), keys.job(ns, queue, ""), keys.tombstone(ns, queue, ""), own


@functools.lru_cache(maxsize=4096)
def reserve_keys(ns: str, queue: str) -> ReserveKeys:
    """reserve.lua's keys for a consume of one queue (most consumes)."""
    return ReserveKeys(keys.timer(ns), queue_keys(ns, queue))


job_prefix = functools.lru_cache(maxsize=4096)(keys.job_prefix)  # per namespace: every reserve's


@functools.lru_cache(maxsize=4096)
def _ack_keys(ns: str, queue: str) -> tuple[str, str, str, str, str, str]:
    """ack.lua's keys that do not name a job, and the prefix of the queue's job keys (keys.job's)."""
    ready, priority, _, meta = queue_keys(ns, queue)
    return keys.timer(ns), ready, keys.dead(ns, queue), priority, meta, keys.job(ns, queue, "")


def ack_call(ns: str, queue: str, job_ids: Sequence[str]) -> tuple[AckKeys, AckArgs]:
    """The keys and arguments of ack.lua for these ids of one queue."""
    timer, ready, dead, priority, meta, prefix = _ack_keys(ns, queue)
    job_keys = (prefix + job_ids[0],) if len(job_ids) == 1 else tuple(prefix + job_id for job_id in job_ids)
    return AckKeys(timer, ready, dead, priority, meta, job_keys), AckArgs(ns, queue, tuple(job_ids))


@dataclass(frozen=True, slots=True)
class PumpResult:
    to_ready: int
    to_dead: int
    next_due_ms: int  # -1: the namespace's timer is empty


# What a traced step was (SPEC 15's span names, after "lmstfy."): "dead" is a job that died at its
# ttr or at a release with no try left.
TracedKind = Literal["publish", "consume", "ack", "complete", "release", "bury", "dead"]


# A job a step was on: its queue, its id, its trace context (None: none).
TracedJob = tuple[str, str, TraceContext | None]


@dataclass(frozen=True, slots=True)
class TracedStep:
    """One step on one job whose trace context is sampled: what an exporter makes a span of, in the
    job's trace with its traceparent's id as parent. Times: time.time_ns() around the step."""

    kind: TracedKind
    pool: str
    ns: str
    queue: str
    job_id: str
    trace: TraceContext
    start_ns: int
    end_ns: int


class EngineObserver:
    """Told of each job operation after it succeeded (metrics count them); this one ignores them."""

    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        """`jobs`: those stored (not duplicates); `replaces`: the job a re-publish ACKed in the same step."""

    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        """`count`: how many jobs were asked for; `jobs` may be fewer, or none."""

    def acked(self, pool: str, ns: str, queue: str, job_id: str) -> None:
        pass

    def respawned(self, pool: str, ns: str, queue: str, count: int) -> None:
        pass

    def pumped(self, pool: str, ns: str, result: PumpResult) -> None:
        pass

    def traced(self, step: TracedStep) -> None:
        """A step on a job whose trace context is sampled (SPEC 15); told only for those."""


class TimerSignal:
    """How an Engine tells its pool's timer pump of each timer entry it adds (due at due_ms), so
    the pump wakes before its planned time. Made in Runtime.start, given to both."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[int], None]] = []

    def listen(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    def scheduled(self, due_ms: int) -> None:
        for listener in self._listeners:
            listener(due_ms)


class EngineBase:
    """An Engine's wiring and the steps its operations share."""

    def __init__(
        self,
        pool: str,
        client: RedisClient,
        blocking_client: RedisClient,
        *,
        scripts: Scripts,
        script_client: ScriptClient | None = None,
        observer: EngineObserver | None = None,
        timers: TimerSignal | None = None,
    ) -> None:
        self.pool = pool
        self.redis = client
        # The script steps' client: a PipelinedRedis on standalone pools (store/pipelined.py), else `client`.
        self.script_client: ScriptClient = script_client or client
        # Each BRPOP holds a connection for its whole wait: they get their own pool.
        self.blocking = blocking_client
        self.wake_hub = WakeHub(blocking_client)
        self.end_watch = EndWatch(blocking_client)  # this process's result() waiters (store/ends.py)
        self.event_tail = EventTail(blocking_client)  # this process's open event streams (store/event_tail.py)
        self.handover = Handover()  # this process's waiting consumes, for the pump's due jobs
        self.scripts = scripts
        self.observer = observer or EngineObserver()
        self.timers = timers or TimerSignal()
        self.ticks = TimerSignal()  # of the schedules' ticks: the pool's scheduler listens
        self._registered: dict[str, float] = {}  # namespace -> when to register it again (monotonic)
        # What the pool holds besides our layout (store/layout.py); None, the common case, costs nothing.
        self.layout: Layout | None = None

    def traced(self, kind: TracedKind, ns: str, start_ns: int, steps: Iterable[TracedJob]) -> None:
        """Tells the observer of the step that started at start_ns and ended now on each job whose trace
        is sampled (SPEC 15); the untraced path costs one look at each job's trace."""
        end_ns = 0
        for queue, job_id, trace in steps:
            if trace is not None and trace.sampled:
                end_ns = end_ns or time.time_ns()
                self.observer.traced(TracedStep(kind, self.pool, ns, queue, job_id, trace, start_ns, end_ns))

    def traced_jobs(self, kind: TracedKind, ns: str, start_ns: int, jobs: Sequence[Job]) -> None:
        """traced() for jobs a step delivered, whose list is built only when one has a trace (rarely):
        a consume built it for every delivery."""
        for job in jobs:
            if job.trace is not None:
                self.traced(kind, ns, start_ns, [(j.queue, j.job_id, j.trace) for j in jobs])
                return

    async def register_namespace(self, ns: str) -> None:
        # Before the first job lands, so the pump's sweep always knows every namespace with a timer.
        if self._registered.get(ns, 0.0) <= time.monotonic():
            await self.redis.sadd(keys.NAMESPACES, ns)
            self._registered[ns] = time.monotonic() + REGISTER_EVERY_S

    async def _scheduled(self, ns: str, due_ms: int) -> None:
        """A timer entry due at due_ms was added or moved: lower the due index, wake the pump."""
        await self.script_client.execute_command(*LOWER_DUE, due_ms, ns)
        self.timers.scheduled(due_ms)

    async def _drain(self, call_keys: DestroyKeys, kind: str, ns: str, queue: str, record: bool = True) -> int:
        """Repeats a chunked destroy until it reports nothing left; how many jobs it deleted. `record`:
        a job with a keep leaves a deleted record (a destroy; a purge leaves none)."""
        args = DestroyArgs(keys.job(ns, queue, ""), CHUNK, kind, "1" if record else "0")
        total, left = 0, 1
        while left:
            chunk = await self.scripts.destroy(self.script_client, call_keys, args)
            total, left = total + chunk.done, chunk.left
        return total

    async def _groups(self, ns: str, queue: str) -> list[str]:
        """The queue's groups that may hold a ready job: those with a turn in the ring, or a slot in use
        (a group with a ready job and a free slot has a turn)."""
        ring = await self.redis.zrange(keys.group_ring(ns, queue), 0, -1)
        slots = await self.redis.hkeys(keys.group_slots(ns, queue))
        return sorted({bytes(name).decode() for name in (*ring, *slots)} - {""})

    async def _destroy_ours(self, ns: str, queue: str, record: bool = True) -> int:
        """Drops every ready job of the queue in our layout with its data; how many were dropped."""
        prio, ready, wake = keys.priority(ns, queue), keys.ready(ns, queue), keys.wake(ns, queue)
        dropped = 0
        for group in await self._groups(ns, queue):
            dropped += await self._drain(DestroyKeys(keys.group_ready(ns, queue, group), wake), "g", ns, queue, record)
        dropped += await self._drain(DestroyKeys(prio, wake), "z", ns, queue, record)
        return dropped + await self._drain(DestroyKeys(ready, wake), "l", ns, queue, record)
