"""Serving the jobs lmstfy left in a Redis, in place (SPEC section 12): an lmstfy-format pool.

lmstfy 1.0.10 keeps a job as a data string `j/<ns>/<q>/<id>` plus one element where it waits: its
ready list `q/<ns>/<q>`, the pool's `timer_set` (delayed, or reserved by an lmstfy consumer) or
its dead letter `d/<ns>/<q>` (docs/LMSTFY_LAYOUT.md). Nothing is copied up front. Each job moves
into lmstfy-py's layout, id, data, ttl and tries kept, in the one script that touches it:

- a consume takes from lmstfy's ready lists first (lmstfy_reserve.lua), the job moving as it is
  reserved; then from lmstfy-py's own structures, as any consume;
- the LmstfyMover loop pumps lmstfy's timer_set as lmstfy's own pump would, into lmstfy-py's
  ready lists and dead letters (lmstfy_pump.lua), and moves lmstfy's dead letters behind
  lmstfy-py's (lmstfy_dead.lua) so that every dead-letter route sees them;
- an ACK also deletes lmstfy's data of the id (a job an lmstfy server delivered before the
  switch); sizes, stats, peeks, namespaces and queues count both layouts.

A still-running lmstfy on the same Redis (a rolling switch) keeps publishing, consuming and
pumping its own layout: every step of either side is atomic, so a job moves once, whoever moves
it. A consumer waiting here looks at lmstfy's lists every LEGACY_SLICE_S, since lmstfy's
publishes wake nobody of lmstfy-py's. What is and is not safe meanwhile: docs/MIGRATING.md.

The mover checks every PRESENCE_EVERY_S whether anything of lmstfy's remains (its timer_set,
its lists); once nothing does, it says so in the log and consumes stop looking at lmstfy's
keys, until a later check finds some again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from lmstfy_py import tasks
from lmstfy_py.errors import NotFound
from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.store import keys
from lmstfy_py.store.engine import PEEK_SCAN, WAIT_SLICE_S, Engine, now_ms, ttl_seconds
from lmstfy_py.store.wake import wait_unless
from lmstfy_py.types import DeadLetterHead, DeadPage, Job, JobInfo, NewJob, Published, QueueStats, Released

log = logging.getLogger(__name__)

LEGACY_SLICE_S = 0.5
PRESENCE_EVERY_S = 5.0
PUMP_BATCH = 100
CHUNK = 1000
MAX_PUMP_SLEEP_S = 1.0  # lmstfy's own pump ticks once a second


def unpack_element(element: bytes) -> tuple[int, str]:
    """lmstfy's 'HHc0' list element: (tries, id)."""
    tries, length = int.from_bytes(element[0:2], "little"), int.from_bytes(element[2:4], "little")
    return tries, element[4 : 4 + length].decode()


def decode_legacy_data(job_id: str, raw: bytes) -> tuple[bytes, dict[str, str] | None]:
    """lmstfy's data of a job: the body (a 26-character id), or a later lmstfy's JSON envelope
    {"body": base64, "attributes": {...}} for a versioned id; _lmstfy.lua reads it the same way."""
    if len(job_id) != 27:
        return raw, None
    try:
        envelope = json.loads(raw)
        return base64.b64decode(envelope.get("body") or ""), envelope.get("attributes") or {}
    except (ValueError, AttributeError, binascii.Error):
        return raw, None


class LmstfyFormat:
    """The JobStore of an lmstfy-format pool: its Engine, and what lmstfy left beside it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pool = engine.pool
        self.redis = engine.redis
        self.observer = engine.observer
        self.present = True  # whether anything of lmstfy's may remain; the mover keeps it true

    # -- publish: lmstfy-py's layout only ------------------------------------------------------

    async def publish(self, ns: str, queue: str, job: NewJob, replaces: str | None = None) -> Published:
        published = await self.engine.publish(ns, queue, job, replaces)
        if replaces:
            await self._drop_legacy(ns, queue, [replaces])
        return published

    async def publish_many(
        self, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None = None
    ) -> list[Published]:
        published = await self.engine.publish_many(ns, queue, jobs, replaces)
        if replaces:
            await self._drop_legacy(ns, queue, [replaces])
        return published

    async def id_taken(self, ns: str, queue: str, job_id: str) -> bool:
        return await self.engine.id_taken(ns, queue, job_id) or bool(
            await self.redis.exists(keys.lmstfy_job(ns, queue, job_id))
        )

    # -- consume: lmstfy's ready lists first ---------------------------------------------------

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
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            jobs = await self.reserve(ns, queues, ttr_ms, count, frozen)
            left = deadline - time.monotonic()
            if jobs or left <= 0 or self.stopping or (interrupt and interrupt.is_set()):
                self.observer.consumed(self.pool, ns, queues, count, jobs)
                return jobs
            # lmstfy's publishes wake nobody here: look at its lists again soon while it may run.
            slice_s = LEGACY_SLICE_S if self.present else (recheck_s or WAIT_SLICE_S)
            await wait_unless(interrupt, self.engine.wait_for_wake(ns, queues, min(left, slice_s)))

    async def reserve(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool = False) -> list[Job]:
        """Up to `count` jobs: lmstfy's first (moved into lmstfy-py's layout as they are reserved)."""
        if self.present:
            call_keys = [keys.timer(ns)]
            for queue in queues:
                call_keys += [keys.lmstfy_ready(ns, queue), *_queue_keys(ns, queue)]
            script = self.engine.scripts.lmstfy_reserve
            jobs = await self.engine.run_reserve(script, call_keys, ns, queues, ttr_ms, count, frozen)
            if jobs:
                await self.engine.register_namespace(ns)
                return jobs
        return await self.engine.reserve(ns, queues, ttr_ms, count, frozen)

    async def wait_for_wake(self, ns: str, queues: Sequence[str], seconds: float) -> None:
        await self.engine.wait_for_wake(ns, queues, seconds)

    # -- a worker's verbs ----------------------------------------------------------------------

    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        return await self.ack_many(ns, queue, [job_id]) > 0

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        # A job lives in one layout only: the counts add up. lmstfy's data of an id it delivered
        # before the switch goes; its timer member is dropped when it comes due, as in lmstfy.
        return await self.engine.ack_many(ns, queue, job_ids) + await self._drop_legacy(ns, queue, job_ids)

    async def _drop_legacy(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        if not self.present or not job_ids:
            return 0
        data_keys = [keys.lmstfy_job(ns, queue, job_id) for job_id in dict.fromkeys(job_ids)]
        return int(await self.engine.scripts.lmstfy_drop(self.engine.script_client, data_keys, ["keys"]))

    async def release(
        self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str, untried: bool = False
    ) -> Released:
        return await self.engine.release(ns, queue, job_id, delay_ms, reason, untried)

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int:
        return await self.engine.touch(ns, queue, job_id, ttr_ms)

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None:
        await self.engine.bury(ns, queue, job_id, reason)

    # -- a queue ---------------------------------------------------------------------------------

    async def peek_queue(self, ns: str, queue: str) -> Job:
        """lmstfy's next ready job when it has one (it is consumed first), else lmstfy-py's."""
        if self.present:
            # The tail is the next: look past heads whose data is gone, as lmstfy-py's own peek does.
            elements = cast(list[bytes], await self.redis.lrange(keys.lmstfy_ready(ns, queue), -PEEK_SCAN, -1))
            for element in reversed(elements):
                tries, job_id = unpack_element(element)
                job = await self._legacy_job(ns, queue, job_id, tries)
                if job is not None:
                    return job
        return await self.engine.peek_queue(ns, queue)

    async def next_jobs(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """lmstfy's ready jobs first (consumes take them first), tail first, then lmstfy-py's."""
        found: list[JobInfo] = []
        if self.present and limit > 0:
            elements = cast(
                list[bytes], await self.redis.lrange(keys.lmstfy_ready(ns, queue), -(limit + PEEK_SCAN), -1)
            )
            for element in reversed(elements):
                tries, job_id = unpack_element(element)
                job = await self._legacy_job(ns, queue, job_id, tries)
                if job is not None and len(found) < limit:
                    found.append(JobInfo(job, "ready", None, 0, None))
        return found + await self.engine.next_jobs(ns, queue, limit - len(found))

    async def _legacy_job(self, ns: str, queue: str, job_id: str, tries: int) -> Job | None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(keys.lmstfy_job(ns, queue, job_id))
        pipe.pttl(keys.lmstfy_job(ns, queue, job_id))
        raw, pttl = await pipe.execute()
        if raw is None:
            return None
        body, attributes = decode_legacy_data(job_id, raw)
        return Job(ns, queue, job_id, body, ttl_seconds(int(pttl)), tries, attributes)

    async def peek_job(self, ns: str, queue: str, job_id: str) -> JobInfo:
        """A job in lmstfy's layout shows its data and ttl; its state is "unknown" (lmstfy kept it
        only in which structure holds its element, and a timer member does not say which it is)."""
        try:
            return await self.engine.peek_job(ns, queue, job_id)
        except NotFound:
            job = await self._legacy_job(ns, queue, job_id, 0) if self.present else None
            if job is None:
                raise
            return JobInfo(job, "unknown", None, 0, None)

    async def size(self, ns: str, queue: str) -> int:
        return await self.engine.size(ns, queue) + await self._legacy_len(keys.lmstfy_ready(ns, queue))

    async def _legacy_len(self, list_key: str) -> int:
        return int(await self.redis.llen(list_key)) if self.present else 0

    async def stats(self, ns: str, queue: str) -> QueueStats:
        """lmstfy's delayed and reserved jobs are not counted: its one timer_set is not kept per queue."""
        await self._adopt_dead(ns, queue)
        ours = await self.engine.stats(ns, queue)
        ready = ours.ready + await self._legacy_len(keys.lmstfy_ready(ns, queue))
        return QueueStats(ready, ours.delayed, ours.reserved, ours.dead, ours.paused)

    async def queue_exists(self, ns: str, queue: str) -> bool:
        return await self.engine.queue_exists(ns, queue) or bool(
            await self.redis.hexists(keys.lmstfy_queues(ns), queue)
        )

    async def pause(self, ns: str, queue: str, paused: bool) -> None:
        await self.engine.pause(ns, queue, paused)  # lmstfy_reserve.lua reads the same flag

    async def destroy(self, ns: str, queue: str) -> int:
        dropped = await self._drop_list(keys.lmstfy_ready(ns, queue), ns, queue)
        await self.redis.hdel(keys.lmstfy_queues(ns), queue)  # as lmstfy's destroy does
        return dropped + await self.engine.destroy(ns, queue)

    async def _drop_list(self, list_key: str, ns: str, queue: str) -> int:
        prefix = keys.lmstfy_job(ns, queue, "")
        total, left = 0, 1
        while left:
            dropped, left = await self.engine.scripts.lmstfy_drop(
                self.engine.script_client, [list_key], ["list", prefix, CHUNK]
            )
            total += int(dropped)
        return total

    # -- the dead letter: lmstfy's moves behind lmstfy-py's before any dead-letter operation -------

    async def _adopt_dead(self, ns: str, queue: str) -> None:
        if self.present:
            await adopt_dead_letter(self.engine, ns, queue)

    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead:
        await self._adopt_dead(ns, queue)
        return await self.engine.dead_letter(ns, queue)

    async def dead_letter_size(self, ns: str, queue: str) -> int:
        await self._adopt_dead(ns, queue)
        return await self.engine.dead_letter_size(ns, queue)

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        await self._adopt_dead(ns, queue)
        return await self.engine.dead_letter_ids(ns, queue, limit)

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage:
        await self._adopt_dead(ns, queue)
        return await self.engine.dead_page(ns, queue, limit, after)

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        await self._adopt_dead(ns, queue)
        return await self.engine.respawn(ns, queue, limit, ttl_ms)

    async def respawn_one(self, ns: str, queue: str, job_id: str, ttl_ms: int, tries: int, delay_ms: int) -> None:
        await self._adopt_dead(ns, queue)
        await self.engine.respawn_one(ns, queue, job_id, ttl_ms, tries, delay_ms)

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int:
        await self._adopt_dead(ns, queue)
        return await self.engine.delete_dead(ns, queue, limit)

    async def delete_dead_one(self, ns: str, queue: str, job_id: str) -> None:
        await self._adopt_dead(ns, queue)
        await self.engine.delete_dead_one(ns, queue, job_id)

    # -- namespaces and the pool -------------------------------------------------------------------

    async def namespaces(self) -> list[str]:
        legacy = await self.redis.hkeys(keys.LMSTFY_NAMESPACES)
        return sorted(set(await self.engine.namespaces()) | {_text(ns) for ns in legacy})

    async def queues(self, ns: str) -> list[str]:
        legacy = await self.redis.hkeys(keys.lmstfy_queues(ns))
        return sorted(set(await self.engine.queues(ns)) | {_text(queue) for queue in legacy})

    async def timer_size(self, ns: str) -> int:
        return await self.engine.timer_size(ns)

    async def purge_namespace(self, ns: str) -> int:
        """lmstfy's jobs of the namespace go too: its lists, its timer members, its registry entry."""
        total = 0
        for queue in [_text(q) for q in await self.redis.hkeys(keys.lmstfy_queues(ns))]:
            total += await self._drop_list(keys.lmstfy_ready(ns, queue), ns, queue)
            total += await self._drop_list(keys.lmstfy_dead(ns, queue), ns, queue)
        total += await self._drop_timer_members(ns)
        await self.redis.hdel(keys.LMSTFY_NAMESPACES, ns)
        await self.redis.delete(keys.lmstfy_queues(ns))
        return total + await self.engine.purge_namespace(ns)

    async def _drop_timer_members(self, ns: str) -> int:
        prefix = len(ns.encode()).to_bytes(2, "little") + ns.encode()
        members = [
            member async for member, _ in self.redis.zscan_iter(keys.LMSTFY_TIMER) if bytes(member).startswith(prefix)
        ]
        total = 0
        for start in range(0, len(members), CHUNK):
            chunk = members[start : start + CHUNK]
            total += int(
                await self.engine.scripts.lmstfy_drop(
                    self.engine.script_client, [keys.LMSTFY_TIMER], ["members", *chunk]
                )
            )
        return total

    async def put_schedule(self, ns: str, schedule: Schedule) -> tuple[bool, int]:
        return await self.engine.put_schedule(ns, schedule)

    async def schedules(self, ns: str, queue: str | None = None) -> list[ScheduleState]:
        return await self.engine.schedules(ns, queue)

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState:
        return await self.engine.schedule(ns, queue, name)

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None:
        await self.engine.delete_schedule(ns, queue, name)

    async def ping(self) -> None:
        await self.engine.ping()

    @property
    def stopping(self) -> bool:
        return self.engine.stopping

    async def stop_waiting(self) -> None:
        await self.engine.stop_waiting()


def _queue_keys(ns: str, queue: str) -> list[str]:
    return [keys.ready(ns, queue), keys.priority(ns, queue), keys.wake(ns, queue), keys.meta(ns, queue)]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def adopt_dead_letter(engine: Engine, ns: str, queue: str) -> int:
    """Moves lmstfy's dead letter of the queue behind lmstfy-py's; returns how many jobs moved."""
    legacy = keys.lmstfy_dead(ns, queue)
    if not await engine.redis.exists(legacy):
        return 0
    total, left = 0, 1
    while left:
        moved, left = await engine.scripts.lmstfy_dead(
            engine.script_client, [legacy, keys.dead(ns, queue)], [ns, queue, CHUNK, now_ms()]
        )
        total += int(moved)
    if total:
        await engine.register_namespace(ns)
    return total


class LmstfyMover(tasks.Background):
    """The loop of an lmstfy-format pool: pumps lmstfy's timer_set into lmstfy-py's layout, moves
    lmstfy's dead letters, and tells the pool's LmstfyFormat whether anything of lmstfy's remains."""

    def __init__(self, store: LmstfyFormat, on_found: Callable[[], Awaitable[None]], unsure: bool = False) -> None:
        """`on_found` runs at each check that finds lmstfy's data; `unsure`: the pool was not
        known to hold any (its Redis was away at start), so finding none is not news."""
        self.store = store
        self.engine = store.engine
        self.redis = store.engine.redis
        self.on_found = on_found
        self._next_check = 0.0
        # What the log last said: lmstfy's data present or not.
        self._reported: bool | None = False if unsure else None
        self.loop = tasks.Loop("lmstfy", self._step, store.pool)

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def _step(self) -> float:
        next_due_s = await self.pump()
        if time.monotonic() >= self._next_check:
            await self.check()
            self._next_check = time.monotonic() + PRESENCE_EVERY_S
        if next_due_s < 0:
            return MAX_PUMP_SLEEP_S
        return max(0.0, min(MAX_PUMP_SLEEP_S, next_due_s - time.time()))

    async def pump(self) -> float:
        """Moves lmstfy's due timer members; returns the next one's due time (unix s), -1 for none."""
        while True:
            now = now_ms()
            moved, next_due_s = await self.engine.scripts.lmstfy_pump(
                self.engine.script_client, [keys.LMSTFY_TIMER], [now // 1000, PUMP_BATCH, now]
            )
            if int(moved) < PUMP_BATCH:
                return float(next_due_s)

    async def check(self) -> None:
        """Moves lmstfy's dead letters; logs when lmstfy's data is found, and when none is left."""
        counts = await self.legacy_counts()
        present = bool(counts["ready"] or counts["timer"])
        self.store.present = present
        if present:
            await self.on_found()
        if present and self._reported is not True:
            log.info(
                "pool %s holds jobs lmstfy left (%d ready, %d on its timer, %d dead): serving them in place,"
                " each moving into lmstfy-py's layout as it is consumed or comes due",
                self.store.pool,
                counts["ready"],
                counts["timer"],
                counts["dead"],
            )
        elif not present and self._reported is not False:
            log.info("pool %s: nothing of lmstfy's layout remains; every job it left has moved", self.store.pool)
        self._reported = present

    async def legacy_counts(self) -> dict[str, int]:
        """lmstfy's ready, timer and dead jobs in the pool; its dead letters are moved on the way."""
        counts = {"ready": 0, "timer": int(await self.redis.zcard(keys.LMSTFY_TIMER)), "dead": 0}
        for ns in [_text(ns) for ns in await self.redis.hkeys(keys.LMSTFY_NAMESPACES)]:
            for queue in [_text(q) for q in await self.redis.hkeys(keys.lmstfy_queues(ns))]:
                counts["ready"] += int(await self.redis.llen(keys.lmstfy_ready(ns, queue)))
                counts["dead"] += await adopt_dead_letter(self.engine, ns, queue)
        return counts


async def holds_lmstfy_data(redis: Any) -> bool:
    """Whether a Redis holds lmstfy's keys (its registry or its timer): one round trip."""
    return bool(await redis.exists(keys.LMSTFY_NAMESPACES, keys.LMSTFY_TIMER))
