"""One Engine per pool: every job operation of the data plane.

The engine decides; the Lua scripts are the only code that moves a job
between states. Times are milliseconds; the web layer converts lmstfy's
seconds. Redis errors propagate as redis-py exceptions and the web layer
answers them with 503.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
from redis.asyncio.cluster import RedisCluster

from lmstfy_py import ids
from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys
from lmstfy_py.store.scripts import Arg, Command, Script, Scripts, run_pipeline
from lmstfy_py.store.wake import WakeHub
from lmstfy_py.types import DeadLetterHead, Job, NewJob

PEEK_SCAN = 50  # ready elements peek looks past when their jobs expired
CHUNK = 1000  # elements one destroy/respawn/bury/pump call handles, so Redis never blocks long
WAIT_SLICE_S = 5.0  # a long-poll re-checks at least this often, in case a wake token was lost with a crashed process
# A namespace purged by another process is registered again by this one's publishes within this time.
REGISTER_EVERY_S = 10.0
PURGE_ROUNDS = 5  # purge passes while publishers, consumers or pumps use the namespace it empties

ScriptCall = tuple[Script, Sequence[str], Sequence[Arg]]


def _index_due(ns: str, due_ms: int) -> Command:
    """Lowers the namespace's entry in the due index to due_ms (the pump's sweep reads it)."""
    return ("ZADD", keys.DUE_INDEX, "LT", due_ms, ns)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ttl_seconds(pttl_ms: int) -> int:
    """Seconds a job has left, rounded up so that only "no expiry" reads as 0."""
    return 0 if pttl_ms < 0 else (pttl_ms + 999) // 1000


def encode_data(body: bytes, attributes: dict[str, str] | None) -> bytes:
    packed: bytes = msgpack.packb([body, attributes], use_bin_type=True)
    return packed


def decode_data(data: bytes) -> tuple[bytes, dict[str, str] | None]:
    body, attributes = msgpack.unpackb(data, raw=False)
    return body, attributes


@dataclass(frozen=True, slots=True)
class PumpResult:
    to_ready: int
    to_dead: int
    next_due_ms: int  # -1: the namespace's timer is empty


class EngineObserver:
    """Told of each job operation after it succeeded (metrics.py counts them); this one ignores them."""

    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        """`replaces`: the job a re-publish ACKed in the same step."""

    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        """`count`: how many jobs were asked for; `jobs` may be fewer, or none."""

    def acked(self, pool: str, ns: str, queue: str, job_id: str) -> None:
        pass

    def respawned(self, pool: str, ns: str, queue: str, count: int) -> None:
        pass

    def pumped(self, pool: str, ns: str, result: PumpResult) -> None:
        pass


class Engine:
    def __init__(
        self, pool: str, client: Any, blocking_client: Any, scripts: Scripts | None = None, script_client: Any = None
    ) -> None:
        self.pool = pool
        self.redis = client
        # The script steps' client: a PipelinedRedis on standalone pools (store/pipelined.py), else `client`.
        self.script_client = script_client or client
        # Each BRPOP holds a connection for its whole wait: they get their own pool.
        self.blocking = blocking_client
        self.wake_hub = WakeHub(blocking_client)
        self.scripts = scripts or Scripts.load()
        self._registered: dict[str, float] = {}  # namespace -> when to register it again (monotonic)
        # Set by the pump: told of every new timer entry so it can wake before its planned time.
        self.on_scheduled: Callable[[int], None] = lambda due_ms: None
        self.observer = EngineObserver()

    # -- publish ---------------------------------------------------------------

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> str:
        """Publishes one job; with `replaces`, ACKs that job in the same atomic step."""
        return (await self.publish_many(ns, queue, [job], replaces))[0]

    async def publish_many(self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None) -> list[str]:
        await self._register_namespace(ns)
        now = now_ms()
        job_ids = [ids.new_job_id(job.delay_ms // 1000, 0 if job.attributes is None else 1, now) for job in jobs]
        calls = [
            self._publish_call(ns, queue, job, job_id, now, replaces) for job, job_id in zip(jobs, job_ids, strict=True)
        ]
        earliest = min((now + job.delay_ms for job in jobs if job.delay_ms > 0), default=0)
        await run_pipeline(self.script_client, calls, [_index_due(ns, earliest)] if earliest else [])
        if earliest:
            self.on_scheduled(earliest)
        self.observer.published(self.pool, ns, queue, jobs, replaces)
        return job_ids

    def _publish_call(
        self, ns: str, queue: str, job: NewJob, job_id: str, now: int, replaces: str | None
    ) -> ScriptCall:
        call_keys = [
            keys.job(ns, queue, job_id),
            keys.ready(ns, queue),
            keys.timer(ns),
            keys.wake(ns, queue),
            keys.queues(ns),
        ]
        due = now + job.delay_ms if job.delay_ms > 0 else 0
        args: list[Arg] = [encode_data(job.body, job.attributes), job.ttl_ms, due, job.tries, ns, queue, job_id]
        if replaces:
            call_keys += [keys.job(ns, queue, replaces), keys.dead(ns, queue)]
            args.append(replaces)
        return self.scripts.publish, call_keys, args

    async def _register_namespace(self, ns: str) -> None:
        # Before the first job lands, so the pump's sweep always knows every namespace with a timer.
        if self._registered.get(ns, 0.0) <= time.monotonic():
            await self.redis.sadd(keys.NAMESPACES, ns)
            self._registered[ns] = time.monotonic() + REGISTER_EVERY_S

    # -- consume ---------------------------------------------------------------

    async def consume(self, ns: str, queues: Sequence[str], ttr_ms: int, timeout_ms: int, count: int) -> list[Job]:
        """Reserves up to `count` jobs, the queues listed first winning; long-polls up to timeout_ms."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            jobs = await self.reserve(ns, queues, ttr_ms, count)
            left = deadline - time.monotonic()
            if jobs or left <= 0 or self.stopping:
                self.observer.consumed(self.pool, ns, queues, count, jobs)
                return jobs
            await self._wait_for_wake(ns, queues, min(left, WAIT_SLICE_S))

    async def reserve(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int) -> list[Job]:
        due = now_ms() + ttr_ms
        call_keys = [keys.timer(ns), *(keys.ready(ns, q) for q in queues), *(keys.wake(ns, q) for q in queues)]
        args: list[Arg] = [due, count, ns, keys.job_prefix(ns), *queues]
        flat, _ = await run_pipeline(
            self.script_client, [(self.scripts.reserve, call_keys, args)], [_index_due(ns, due)]
        )
        if flat:
            self.on_scheduled(due)
        return [self._reserved_job(ns, flat[i : i + 5]) for i in range(0, len(flat), 5)]

    @staticmethod
    def _reserved_job(ns: str, fields: list[Any]) -> Job:
        queue, job_id, data, pttl, remain = fields
        body, attributes = decode_data(data)
        return Job(ns, queue.decode(), job_id.decode(), body, ttl_seconds(pttl), remain, attributes)

    async def _wait_for_wake(self, ns: str, queues: Sequence[str], seconds: float) -> None:
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

    # -- ack, peek, size -------------------------------------------------------

    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        return await self.ack_many(ns, queue, [job_id]) == 1

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        """ACKs the jobs in one script call; returns how many still existed. Each id counts as one ACK."""
        if not job_ids:
            return 0
        call_keys = [keys.timer(ns), keys.ready(ns, queue), keys.dead(ns, queue)]
        call_keys += [keys.job(ns, queue, job_id) for job_id in job_ids]
        found = int(await self.scripts.ack(self.script_client, call_keys, [ns, queue, *job_ids]))
        for job_id in job_ids:
            self.observer.acked(self.pool, ns, queue, job_id)
        return found

    async def peek_queue(self, ns: str, queue: str) -> Job:
        found = await self.scripts.peek(
            self.script_client, [keys.ready(ns, queue)], [keys.job(ns, queue, ""), PEEK_SCAN]
        )
        if not found:
            raise NotFound("the queue is empty")
        job_id, data, pttl, tries = found
        return self._job(ns, queue, job_id.decode(), data, pttl, tries)

    async def peek_job(self, ns: str, queue: str, job_id: str) -> Job:
        found = await self.scripts.peek_job(self.script_client, [keys.job(ns, queue, job_id)], [])
        if not found:
            raise NotFound("job not found")
        data, pttl, tries = found
        return self._job(ns, queue, job_id, data, pttl, tries)

    @staticmethod
    def _job(ns: str, queue: str, job_id: str, data: bytes, pttl: int, tries: int) -> Job:
        body, attributes = decode_data(data)
        return Job(ns, queue, job_id, body, ttl_seconds(pttl), tries, attributes)

    async def size(self, ns: str, queue: str) -> int:
        return int(await self.redis.llen(keys.ready(ns, queue)))

    async def queue_exists(self, ns: str, queue: str) -> bool:
        """Whether a job was ever published to the queue (it is in the namespace's registry)."""
        return bool(await self.redis.sismember(keys.queues(ns), queue))

    async def timer_size(self, ns: str) -> int:
        return int(await self.redis.zcard(keys.timer(ns)))

    async def destroy(self, ns: str, queue: str) -> int:
        """Drops every ready job of the queue with its data; returns how many jobs were dropped."""
        total, left = 0, 1
        while left:
            dropped, left = await self.scripts.destroy(
                self.script_client, [keys.ready(ns, queue), keys.wake(ns, queue)], [keys.job(ns, queue, ""), CHUNK]
            )
            total += dropped
        return total

    # -- dead letter -----------------------------------------------------------

    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead:
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(keys.dead(ns, queue))
        pipe.lindex(keys.dead(ns, queue), -1)
        size, head = await pipe.execute()
        return DeadLetterHead(int(size), keys.unpack_element(head)[1] if head else "")

    async def dead_letter_size(self, ns: str, queue: str) -> int:
        return int(await self.redis.llen(keys.dead(ns, queue)))

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        """The oldest `limit` dead job ids, oldest first."""
        elements = await self.redis.lrange(keys.dead(ns, queue), -limit, -1)
        return [keys.unpack_element(e)[1] for e in reversed(elements)]

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        """Moves up to `limit` oldest dead jobs back to ready with one try and a fresh ttl."""
        call_keys = [keys.dead(ns, queue), keys.ready(ns, queue), keys.wake(ns, queue)]
        prefix = keys.job(ns, queue, "")
        count = await self._in_chunks(
            limit, lambda n: self.scripts.respawn(self.script_client, call_keys, [n, ttl_ms, prefix])
        )
        self.observer.respawned(self.pool, ns, queue, count)
        return count

    async def bury(self, ns: str, queue: str, limit: int) -> int:
        """Deletes up to `limit` oldest dead jobs with their data."""
        prefix = keys.job(ns, queue, "")
        return await self._in_chunks(
            limit, lambda n: self.scripts.bury(self.script_client, [keys.dead(ns, queue)], [n, prefix])
        )

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

    # -- registry and pump -----------------------------------------------------

    async def namespaces(self) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(keys.NAMESPACES))

    async def queues(self, ns: str) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(keys.queues(ns)))

    async def purge_namespace(self, ns: str) -> int:
        """Deletes every job of the namespace (delayed, ready, reserved, dead) and every key of it,
        CHUNK per script call; returns how many jobs were deleted.

        Each step is one script that deletes jobs with their elements, so whatever another process
        does meanwhile (publish, consume, pump), no job is left half deleted. Rounds repeat until
        the last step (forget_namespace.lua) finds nothing left; a namespace still in use after
        PURGE_ROUNDS keeps what was published meanwhile, intact.
        """
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
        return bool(await self.scripts.forget_namespace(self.script_client, call_keys, prefixes))

    async def _purge_round(self, ns: str, queues: Sequence[str]) -> int:
        total = await self._drain(self.scripts.purge_timer, [keys.timer(ns)], [CHUNK, keys.job_prefix(ns)])
        for queue in queues:
            # destroy.lua empties any list of (tries, id) elements with their jobs' data: dead letters too.
            for elements in (keys.ready(ns, queue), keys.dead(ns, queue)):
                call_keys = [elements, keys.wake(ns, queue)]
                total += await self._drain(self.scripts.destroy, call_keys, [keys.job(ns, queue, ""), CHUNK])
        return total

    async def _drain(self, script: Script, call_keys: Sequence[str], args: Sequence[Arg]) -> int:
        """Repeats a chunked script until it reports nothing left; how many jobs it deleted."""
        total, left = 0, 1
        while left:
            deleted, left = await script(self.script_client, call_keys, args)
            total += deleted
        return total

    async def pump(self, ns: str, now: int) -> PumpResult:
        """Moves every due timer member of the namespace, CHUNK per script call."""
        args: list[Arg] = [
            now,
            CHUNK,
            keys.job_prefix(ns),
            keys.ready_prefix(ns),
            keys.dead_prefix(ns),
            keys.wake_prefix(ns),
        ]
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
        clients = (self.script_client, self.redis, self.blocking)
        for client in {id(client): client for client in clients}.values():
            await client.aclose()
