"""One Engine per pool: every job operation of the data plane on one Redis deployment.

The engine decides; the Lua scripts are the only code that moves a job between states. Times
are milliseconds; the web layer converts lmstfy's seconds. Redis errors propagate as redis-py
exceptions and the web layer answers them with 503. Everything an Engine needs comes in through
its constructor (clients, scripts, the observer that counts, the signal that wakes its pool's
timer pump), wired in Runtime.start.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from lmstfy_py import ids
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.store import keys, schedule_ops
from lmstfy_py.store.jobdata import decode_data, encode_data
from lmstfy_py.store.scripts import Arg, Command, Script, ScriptClient, Scripts, run_pipeline
from lmstfy_py.store.wake import WakeHub, wait_unless
from lmstfy_py.types import (
    DeadJob,
    DeadLetterHead,
    DeadPage,
    Job,
    JobInfo,
    JobStateName,
    NewJob,
    Published,
    QueueStats,
    Released,
)

PEEK_SCAN = 50  # ready elements peek looks past when their jobs expired
CHUNK = 1000  # elements one destroy/respawn/delete/pump call handles, so Redis never blocks long
WAIT_SLICE_S = 5.0  # a long-poll re-checks at least this often, in case a wake token was lost with a crashed process
# A namespace purged by another process is registered again by this one's publishes within this time.
REGISTER_EVERY_S = 10.0
PURGE_ROUNDS = 5  # purge passes while publishers, consumers or pumps use the namespace it empties
RESERVED_FIELDS = 7  # what reserve.lua returns per job
NEXT_FIELDS = 8  # what next_jobs.lua returns per job

RedisClient = Redis | RedisCluster
ScriptCall = tuple[Script, Sequence[str], Sequence[Arg]]
_STATES: dict[bytes, JobStateName] = {b"T": "delayed", b"R": "ready", b"X": "reserved", b"D": "dead"}


def _index_due(ns: str, due_ms: int) -> Command:
    """Lowers the namespace's entry in the due index to due_ms (the pump's sweep reads it)."""
    return ("ZADD", keys.DUE_INDEX, "LT", due_ms, ns)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ttl_seconds(pttl_ms: int) -> int:
    """Seconds a job has left, rounded up so that only "no expiry" reads as 0."""
    return 0 if pttl_ms < 0 else (pttl_ms + 999) // 1000


def _int(value: Any) -> int | None:
    """A number a script returned, None for an absent field (false, which arrives as None)."""
    return None if value is None else int(value)


def _text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode("utf-8", "replace")


# Built once per queue rather than per request (the same strings for every job of a queue); bounded so
# that clients naming endless queues cannot grow it.
@functools.lru_cache(maxsize=4096)
def _queue_keys(ns: str, queue: str) -> tuple[str, ...]:
    """A queue's ready list, priority set, wake list and meta hash, as the scripts take them."""
    return keys.ready(ns, queue), keys.priority(ns, queue), keys.wake(ns, queue), keys.meta(ns, queue)


@functools.lru_cache(maxsize=4096)
def _publish_keys(ns: str, queue: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys of a publish that do not depend on the job: those before its tombstone, those after."""
    return (keys.timer(ns), keys.queues(ns)), (*_queue_keys(ns, queue), keys.dead(ns, queue))


@dataclass(frozen=True, slots=True)
class PumpResult:
    to_ready: int
    to_dead: int
    next_due_ms: int  # -1: the namespace's timer is empty


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


class Engine:
    """The JobStore (store/jobstore.py) of one pool."""

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
        self.scripts = scripts
        self.observer = observer or EngineObserver()
        self.timers = timers or TimerSignal()
        self.ticks = TimerSignal()  # of the schedules' ticks: the pool's scheduler listens
        self._registered: dict[str, float] = {}  # namespace -> when to register it again (monotonic)

    # -- publish ---------------------------------------------------------------------------

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> Published:
        """Publishes one job; with `replaces`, ACKs that job in the same atomic step."""
        return (await self.publish_many(ns, queue, [job], replaces))[0]

    async def publish_many(
        self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None
    ) -> list[Published]:
        await self.register_namespace(ns)
        now = now_ms()
        job_ids = [
            job.job_id or ids.new_job_id(job.delay_ms // 1000, 0 if job.attributes is None else 1, now) for job in jobs
        ]
        calls = [
            self._publish_call(ns, queue, job, job_id, now, replaces) for job, job_id in zip(jobs, job_ids, strict=True)
        ]
        earliest = min((now + job.delay_ms for job in jobs if job.delay_ms > 0), default=0)
        replies = await run_pipeline(self.script_client, calls, [_index_due(ns, earliest)] if earliest else [])
        created = [bool(reply) for reply in replies[: len(calls)]]
        if earliest:
            self.timers.scheduled(earliest)
        self.observer.published(self.pool, ns, queue, [j for j, c in zip(jobs, created, strict=True) if c], replaces)
        return [Published(job_id, made) for job_id, made in zip(job_ids, created, strict=True)]

    def _publish_call(
        self, ns: str, queue: str, job: NewJob, job_id: str, now: int, replaces: str | None
    ) -> ScriptCall:
        before, after = _publish_keys(ns, queue)
        call_keys = [keys.job(ns, queue, job_id), *before, keys.tombstone(ns, queue, job_id), *after]
        due = now + job.delay_ms if job.delay_ms > 0 else 0
        backoff = job.backoff.spec() if job.backoff else ""
        args: list[Arg] = [encode_data(job.body, job.attributes), job.ttl_ms, due, job.tries, ns, queue, job_id]
        args += [now, job.priority, job.unique_for_ms, backoff]
        if replaces:
            call_keys.append(keys.job(ns, queue, replaces))
            args.append(replaces)
        return self.scripts.publish, call_keys, args

    async def register_namespace(self, ns: str) -> None:
        # Before the first job lands, so the pump's sweep always knows every namespace with a timer.
        if self._registered.get(ns, 0.0) <= time.monotonic():
            await self.redis.sadd(keys.NAMESPACES, ns)
            self._registered[ns] = time.monotonic() + REGISTER_EVERY_S

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
        """Reserves up to `count` jobs, the queues listed first winning; long-polls up to timeout_ms.

        `frozen`: the deliveries use up no try (a pusher's, as lmstfy's: retried until the ttl).
        `interrupt`: once set, the long-poll ends with what it has (a push group whose queues changed).
        `recheck_s`: how often it looks at the queues without a wake-up, in case a wake token was
        lost with a crashed process (default WAIT_SLICE_S; a push group, holding no client, waits longer).
        """
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            jobs = await self.reserve(ns, queues, ttr_ms, count, frozen)
            left = deadline - time.monotonic()
            if jobs or left <= 0 or self.stopping or (interrupt and interrupt.is_set()):
                self.observer.consumed(self.pool, ns, queues, count, jobs)
                return jobs
            await wait_unless(interrupt, self.wait_for_wake(ns, queues, min(left, recheck_s or WAIT_SLICE_S)))

    async def reserve(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool = False) -> list[Job]:
        call_keys = [keys.timer(ns)]
        for queue in queues:
            call_keys += _queue_keys(ns, queue)
        return await self.run_reserve(self.scripts.reserve, call_keys, ns, queues, ttr_ms, count, frozen)

    async def run_reserve(
        self,
        script: Script,
        call_keys: Sequence[str],
        ns: str,
        queues: Sequence[str],
        ttr_ms: int,
        count: int,
        frozen: bool,
    ) -> list[Job]:
        """Runs reserve.lua, or a script answering as it does (lmstfy_reserve.lua), with its
        due-index update in the same round trip."""
        due = now_ms() + ttr_ms
        args: list[Arg] = [due, count, ns, keys.job_prefix(ns), "1" if frozen else "0", *queues]
        flat, _ = await run_pipeline(self.script_client, [(script, call_keys, args)], [_index_due(ns, due)])
        if flat:
            self.timers.scheduled(due)
        return [self._reserved_job(ns, flat[i : i + RESERVED_FIELDS]) for i in range(0, len(flat), RESERVED_FIELDS)]

    @staticmethod
    def _reserved_job(ns: str, fields: list[Any]) -> Job:
        queue, job_id, data, pttl, remain, attempts, created = fields
        body, attributes = decode_data(data)
        return Job(
            ns, queue.decode(), job_id.decode(), body, ttl_seconds(pttl), remain, attributes, attempts, _int(created)
        )

    async def wait_for_wake(self, ns: str, queues: Sequence[str], seconds: float) -> None:
        # Waits on the wake lists, never on the ready lists: a BRPOP that popped a job and
        # then lost its process would lose the job (lmstfy's bug). One BRPOP per queue set
        # is shared by every waiting request of this process (store/wake.py).
        await self.wake_hub.wait([keys.wake(ns, q) for q in queues], seconds)

    @property
    def stopping(self) -> bool:
        """Set by stop_waiting(): long-polls answer at once instead of waiting."""
        return self.wake_hub.closed

    async def stop_waiting(self) -> None:
        """Ends every long-poll of this process now ("no job available"); the first step of a graceful stop."""
        await self.wake_hub.close()

    # -- a worker's verbs on its reservation --------------------------------------------------

    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        return await self.ack_many(ns, queue, [job_id]) == 1

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        """ACKs the jobs in one script call; returns how many still existed. Each id counts as one ACK."""
        if not job_ids:
            return 0
        call_keys = [keys.timer(ns), keys.ready(ns, queue), keys.dead(ns, queue)]
        call_keys += [keys.priority(ns, queue), keys.meta(ns, queue)]
        call_keys += [keys.job(ns, queue, job_id) for job_id in job_ids]
        found = int(await self.scripts.ack(self.script_client, call_keys, [ns, queue, *job_ids]))
        for job_id in job_ids:
            self.observer.acked(self.pool, ns, queue, job_id)
        return found

    async def release(
        self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str, untried: bool = False
    ) -> Released:
        """Ends a reservation without ACK: ready again after `delay_ms` (None: the job's backoff;
        at once when `untried`), or in the dead letter when no tries are left. `untried` gives
        back the try and the attempt the reservation took. 404 unknown, 409 not reserved."""
        now = now_ms()
        call_keys = [keys.job(ns, queue, job_id), keys.timer(ns), *_queue_keys(ns, queue), keys.dead(ns, queue)]
        args: list[Arg] = [ns, queue, job_id, now, "" if delay_ms is None else delay_ms, reason, int(untried)]
        outcome = await self._verb(self.scripts.release, call_keys, args)
        if outcome[0] == b"buried":
            return Released(buried=True)
        due = int(outcome[1])
        if due > now:
            await self._scheduled(ns, due)
        return Released(buried=False, due_ms=due, remain_tries=int(outcome[2]))

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int:
        """The reservation now ends ttr_ms from now; returns when (unix ms). 404 unknown, 409 not reserved."""
        deadline = now_ms() + ttr_ms
        await self._verb(
            self.scripts.touch, [keys.job(ns, queue, job_id), keys.timer(ns)], [ns, queue, job_id, deadline]
        )
        await self._scheduled(ns, deadline)
        return deadline

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None:
        """The reserved job goes to the dead letter now. 404 unknown, 409 not reserved."""
        call_keys = [keys.job(ns, queue, job_id), keys.timer(ns), keys.meta(ns, queue), keys.dead(ns, queue)]
        await self._verb(self.scripts.bury, call_keys, [ns, queue, job_id, now_ms(), reason])

    async def _verb(self, script: Script, call_keys: Sequence[str], args: Sequence[Arg]) -> list[Any]:
        outcome: list[Any] = await script(self.script_client, call_keys, args)
        if outcome[0] == b"missing":
            raise NotFound("job not found")
        if outcome[0] == b"not reserved":
            raise Conflict("job is not reserved")
        return outcome

    async def _scheduled(self, ns: str, due_ms: int) -> None:
        """A timer entry due at due_ms was added or moved: lower the due index, wake the pump."""
        await self.script_client.execute_command(*_index_due(ns, due_ms))
        self.timers.scheduled(due_ms)

    # -- looking at a queue ------------------------------------------------------------------

    async def peek_queue(self, ns: str, queue: str) -> Job:
        call_keys = [keys.ready(ns, queue), keys.priority(ns, queue)]
        found = await self.scripts.peek(self.script_client, call_keys, [keys.job(ns, queue, ""), PEEK_SCAN])
        if not found:
            raise NotFound("the queue is empty")
        job_id, data, pttl, tries = found
        body, attributes = decode_data(data)
        return Job(ns, queue, job_id.decode(), body, ttl_seconds(pttl), tries, attributes)

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """The next `limit` ready jobs, in the order consumes would get them; consumes nothing.

        A paused queue's are listed too (they are delivered in this order once it is resumed).
        Jobs whose data expired are skipped. The script looks at `limit` + PEEK_SCAN elements of
        the priority set and as many of the ready list at most: past PEEK_SCAN expired jobs
        there, fewer jobs than there are are listed (never out of order).
        """
        if limit <= 0:
            return []
        call_keys = [keys.ready(ns, queue), keys.priority(ns, queue)]
        args: list[Arg] = [keys.job(ns, queue, ""), limit, limit + PEEK_SCAN]
        flat = await self.scripts.next_jobs(self.script_client, call_keys, args)
        return [_ready_job(ns, queue, flat[i : i + NEXT_FIELDS]) for i in range(0, len(flat), NEXT_FIELDS)]

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo:
        """A job by id, whatever its state, with its state."""
        found = await self.scripts.job_state(
            self.script_client, [keys.job(ns, queue, job_id), keys.timer(ns)], [ns, queue, job_id]
        )
        if not found:
            raise NotFound("job not found")
        data, pttl, tries, state, priority, attempts, error, died, created, due = found
        body, attributes = decode_data(data)
        job = Job(ns, queue, job_id, body, ttl_seconds(pttl), tries, attributes, _int(attempts) or 0, _int(created))
        return JobInfo(job, _STATES.get(state, "delayed"), _int(due), _int(priority) or 0, _text(error), _int(died))

    async def size(self, ns: str, queue: str) -> int:
        """Ready jobs, of any priority."""
        call_keys = [keys.ready(ns, queue), keys.priority(ns, queue)]
        return int(await self.scripts.size(self.script_client, call_keys, []))

    async def stats(self, ns: str, queue: str) -> QueueStats:
        call_keys = [keys.ready(ns, queue), keys.priority(ns, queue), keys.dead(ns, queue), keys.meta(ns, queue)]
        ready, delayed, reserved, dead, paused = await self.scripts.stats(self.script_client, call_keys, [])
        return QueueStats(ready, delayed, reserved, dead, bool(paused))

    async def id_taken(self, ns: str, queue: str, job_id: str) -> bool:
        """Whether a publish with this job id would be a duplicate here: its job lives, or its unique_for lasts."""
        found = await self.redis.exists(keys.job(ns, queue, job_id), keys.tombstone(ns, queue, job_id))
        return bool(found)

    async def queue_exists(self, ns: str, queue: str) -> bool:
        """Whether a job was ever published to the queue (it is in the namespace's registry)."""
        return bool(await self.redis.sismember(keys.queues(ns), queue))

    async def timer_size(self, ns: str) -> int:
        return int(await self.redis.zcard(keys.timer(ns)))

    async def pause(self, ns: str, queue: str, paused: bool) -> None:
        """Stops (or resumes) delivering the queue's jobs; publishes and timers go on."""
        call_keys = [keys.meta(ns, queue), keys.ready(ns, queue), keys.priority(ns, queue), keys.wake(ns, queue)]
        await self.scripts.pause(self.script_client, call_keys, ["1" if paused else "0"])

    async def destroy(self, ns: str, queue: str) -> int:
        """Drops every ready job of the queue with its data; returns how many jobs were dropped."""
        dropped = await self._drain(
            self.scripts.destroy, [keys.priority(ns, queue), keys.wake(ns, queue)], ["z"], ns, queue
        )
        return dropped + await self._drain(
            self.scripts.destroy, [keys.ready(ns, queue), keys.wake(ns, queue)], ["l"], ns, queue
        )

    async def _drain(self, script: Script, call_keys: Sequence[str], kind: Sequence[Arg], ns: str, queue: str) -> int:
        """Repeats a chunked destroy until it reports nothing left; how many jobs it deleted."""
        args = [keys.job(ns, queue, ""), CHUNK, *kind]
        total, left = 0, 1
        while left:
            deleted, left = await script(self.script_client, call_keys, args)
            total += deleted
        return total

    # -- dead letter -------------------------------------------------------------------------

    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead:
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(keys.dead(ns, queue))
        pipe.lindex(keys.dead(ns, queue), -1)
        size, head = await pipe.execute()  # bytes: no decode_responses
        return DeadLetterHead(int(size), keys.unpack_element(head)[1] if head else "")

    async def dead_letter_size(self, ns: str, queue: str) -> int:
        return int(await self.redis.llen(keys.dead(ns, queue)))

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        """The oldest `limit` dead job ids, oldest first."""
        elements = await self.redis.lrange(keys.dead(ns, queue), -limit, -1)
        return [keys.unpack_element(e)[1] for e in reversed(elements) if isinstance(e, bytes)]

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage:
        """Up to `limit` dead jobs, oldest first, from the one after `after` (None: the oldest)."""
        found = await self.scripts.dead_page(
            self.script_client, [keys.dead(ns, queue)], [keys.job(ns, queue, ""), limit, after or ""]
        )
        if found[0] == -1:
            raise NotFound("the job `after` names is not in the dead letter")
        jobs = [_dead_job(found[i : i + 5]) for i in range(1, len(found), 5)]
        return DeadPage(jobs, jobs[-1].job_id if found[0] and jobs else None)

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        """Moves up to `limit` oldest dead jobs back to ready with one try and a fresh ttl."""
        call_keys = [keys.dead(ns, queue), *_queue_keys(ns, queue)]
        prefix = keys.job(ns, queue, "")
        count = await self._in_chunks(
            limit, lambda n: self.scripts.respawn(self.script_client, call_keys, [n, ttl_ms, prefix])
        )
        self.observer.respawned(self.pool, ns, queue, count)
        return count

    async def respawn_one(self, ns: str, queue: str, job_id: str, ttl_ms: int, tries: int, delay_ms: int) -> None:
        """One dead job back to ready (after `delay_ms`) with `tries` and a fresh ttl. 404 when not dead."""
        due = now_ms() + delay_ms if delay_ms else 0
        call_keys = [keys.job(ns, queue, job_id), keys.dead(ns, queue), keys.timer(ns), *_queue_keys(ns, queue)]
        call_keys.append(keys.tombstone(ns, queue, job_id))
        args: list[Arg] = [ns, queue, job_id, ttl_ms, tries, due]
        if not await self.scripts.respawn_one(self.script_client, call_keys, args):
            raise NotFound("job not found in the dead letter")
        if due:
            await self._scheduled(ns, due)
        self.observer.respawned(self.pool, ns, queue, 1)

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int:
        """Deletes up to `limit` oldest dead jobs with their data."""
        prefix = keys.job(ns, queue, "")
        return await self._in_chunks(
            limit, lambda n: self.scripts.delete_dead(self.script_client, [keys.dead(ns, queue)], [n, prefix])
        )

    async def delete_dead_one(self, ns: str, queue: str, job_id: str) -> None:
        """Deletes one dead job with its data. 404 when it is not in the dead letter."""
        call_keys = [keys.job(ns, queue, job_id), keys.dead(ns, queue)]
        if not await self.scripts.delete_dead_one(self.script_client, call_keys, [job_id]):
            raise NotFound("job not found in the dead letter")

    @staticmethod
    async def _in_chunks(limit: int, step: Callable[[int], Any]) -> int:
        total = 0
        while total < limit:
            want = min(CHUNK, limit - total)
            done = int(await step(want))
            total += done
            if done < want:
                break
        return total

    # -- recurring jobs (store/schedule_ops.py) --------------------------------------------------

    async def put_schedule(self, ns: str, schedule: Schedule) -> tuple[bool, int]:
        """Registers or replaces a schedule; returns whether it is new, and its first tick (ms)."""
        return await schedule_ops.put(self, ns, schedule, now_ms())

    async def schedules(self, ns: str, queue: str | None = None) -> list[ScheduleState]:
        return await schedule_ops.listed(self, ns, queue)

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState:
        return await schedule_ops.one(self, ns, queue, name)

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None:
        await schedule_ops.delete(self, ns, queue, name)

    # -- registry, purge, pump ---------------------------------------------------------------

    async def namespaces(self) -> list[str]:
        return _names(await self.redis.smembers(keys.NAMESPACES))

    async def queues(self, ns: str) -> list[str]:
        return _names(await self.redis.smembers(keys.queues(ns)))

    async def purge_namespace(self, ns: str) -> int:
        """Deletes every job of the namespace (delayed, ready, reserved, dead) and every key of it,
        CHUNK per script call; returns how many jobs were deleted.

        Each step is one script that deletes jobs with their elements, so whatever another process
        does meanwhile (publish, consume, pump), no job is left half deleted. Rounds repeat until
        the last step (forget_namespace.lua) finds nothing left; a namespace still in use after
        PURGE_ROUNDS keeps what was published meanwhile, intact.
        """
        await schedule_ops.forget_namespace(self, ns)
        total = 0
        for _ in range(PURGE_ROUNDS):
            total += await self._purge_round(ns, await self.queues(ns))
            if await self._forget(ns):
                break
        pipe = self.redis.pipeline(transaction=False)
        pipe.srem(keys.NAMESPACES, ns)
        pipe.zrem(keys.DUE_INDEX, ns)
        await pipe.execute()
        self._registered.pop(ns, None)
        return total

    async def _forget(self, ns: str) -> bool:
        call_keys = [keys.timer(ns), keys.queues(ns)]
        prefixes = [keys.ready_prefix(ns), keys.dead_prefix(ns), keys.wake_prefix(ns)]
        prefixes += [keys.priority_prefix(ns), keys.meta_prefix(ns)]
        return bool(await self.scripts.forget_namespace(self.script_client, call_keys, prefixes))

    async def _purge_round(self, ns: str, queues: Sequence[str]) -> int:
        total, left = 0, 1
        while left:
            deleted, left = await self.scripts.purge_timer(
                self.script_client, [keys.timer(ns)], [CHUNK, keys.job_prefix(ns), keys.meta_prefix(ns)]
            )
            total += deleted
        for queue in queues:
            # destroy.lua empties any list of (tries, id) elements with their jobs' data: dead letters too.
            total += await self.destroy(ns, queue)
            total += await self._drain(
                self.scripts.destroy, [keys.dead(ns, queue), keys.wake(ns, queue)], ["l"], ns, queue
            )
        return total

    async def pump(self, ns: str, now: int) -> PumpResult:
        """Moves every due timer member of the namespace, CHUNK per script call."""
        args: list[Arg] = [now, CHUNK, keys.job_prefix(ns), keys.ready_prefix(ns), keys.dead_prefix(ns)]
        args += [keys.wake_prefix(ns), keys.priority_prefix(ns), keys.meta_prefix(ns)]
        to_ready = to_dead = 0
        while True:
            ready, dead, next_due = await self.scripts.pump(self.script_client, [keys.timer(ns)], args)
            to_ready, to_dead = to_ready + ready, to_dead + dead
            if next_due == -1 or next_due > now:
                result = PumpResult(to_ready, to_dead, next_due)
                self.observer.pumped(self.pool, ns, result)
                return result

    async def timer_head(self, ns: str) -> int:
        """Due ms of the namespace's earliest timer member, -1 when empty."""
        head = await self.redis.zrange(keys.timer(ns), 0, 0, withscores=True)
        return int(head[0][1]) if head else -1

    async def ping(self) -> None:
        """Raises unless the pool's Redis answers (every primary, for a cluster)."""
        if isinstance(self.redis, RedisCluster):
            await self.redis.ping(target_nodes=RedisCluster.PRIMARIES)
        else:
            await self.script_client.execute_command("PING")

    async def close(self) -> None:
        await self.wake_hub.close()
        clients: tuple[Any, ...] = (self.script_client, self.redis, self.blocking)
        for client in {id(client): client for client in clients}.values():
            await client.aclose()


def _names(members: set[Any]) -> list[str]:
    """Set members as text, sorted (the clients answer bytes: no decode_responses)."""
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)


def _ready_job(ns: str, queue: str, fields: list[Any]) -> JobInfo:
    job_id, data, pttl, tries, priority, attempts, error, created = fields
    body, attributes = decode_data(data)
    job = Job(
        ns, queue, job_id.decode(), body, ttl_seconds(pttl), tries, attributes, _int(attempts) or 0, _int(created)
    )
    return JobInfo(job, "ready", None, _int(priority) or 0, _text(error))


def _dead_job(fields: list[Any]) -> DeadJob:
    job_id, data, attempts, error, died = fields
    body = decode_data(data)[0] if data is not None else b""
    return DeadJob(job_id.decode(), body, _int(attempts) or 0, _text(error), _int(died))
