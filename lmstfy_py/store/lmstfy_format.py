"""Serving the jobs lmstfy left in a Redis, in place (SPEC section 12): an lmstfy-format pool.

lmstfy 1.0.10 keeps a job as a data string `j/<ns>/<q>/<id>` plus one element where it waits: its
ready list `q/<ns>/<q>`, the pool's `timer_set` (delayed, or reserved by an lmstfy consumer) or
its dead letter `d/<ns>/<q>` (docs/LMSTFY_LAYOUT.md). Nothing is copied up front. Each job moves
into lmstfy-py's layout, id, data, ttl and tries kept, in the one script that touches it. The
pool's Engine does every job operation; its LmstfyLayout (the Layout of store/layout.py) is what
the Engine asks of lmstfy's keys:

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

import base64
import binascii
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from lmstfy_py import tasks
from lmstfy_py.store import keys
from lmstfy_py.store.contracts.jobs import ReserveKeys
from lmstfy_py.store.contracts.upkeep import (
    DropArgs,
    DropKeys,
    LmstfyDeadArgs,
    LmstfyDeadKeys,
    LmstfyPumpArgs,
    TimerKeys,
)
from lmstfy_py.store.engine import PEEK_SCAN, WAIT_SLICE_S, Engine, now_ms, ttl_seconds
from lmstfy_py.store.engine_base import queue_keys
from lmstfy_py.types import Job, JobInfo

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


class LmstfyLayout:
    """What lmstfy left in a pool, as its Engine's Layout (store/layout.py)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pool = engine.pool
        self.redis = engine.redis
        self.present = True  # whether anything of lmstfy's may remain; the mover keeps it true

    async def reserve_first(self, ns: str, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool) -> list[Job]:
        """lmstfy's ready jobs, moved into lmstfy-py's layout as they are reserved (lmstfy_reserve.lua
        takes lmstfy-py's own in the same step when lmstfy's run out)."""
        if not self.present:
            return []
        per_queue = tuple(key for queue in queues for key in (keys.lmstfy_ready(ns, queue), *queue_keys(ns, queue)))
        call_keys = ReserveKeys(keys.timer(ns), per_queue)
        step = self.engine.scripts.lmstfy_reserve
        jobs = await self.engine.run_reserve(step, call_keys, ns, queues, ttr_ms, count, frozen)
        if jobs:
            await self.engine.register_namespace(ns)
        return jobs

    def wait_slice_s(self, recheck_s: float | None) -> float:
        # lmstfy's publishes wake nobody here: look at its lists again soon while it may run.
        return LEGACY_SLICE_S if self.present else (recheck_s or WAIT_SLICE_S)

    async def acked(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        """lmstfy's data of an id it delivered before the switch goes; its timer member is dropped
        when it comes due, as in lmstfy."""
        if not self.present or not job_ids:
            return 0
        data_keys = DropKeys(tuple(keys.lmstfy_job(ns, queue, job_id) for job_id in dict.fromkeys(job_ids)))
        return (await self.engine.scripts.lmstfy_drop(self.engine.script_client, data_keys, DropArgs("keys", ()))).done

    async def id_taken(self, ns: str, queue: str, job_id: str) -> bool:
        return bool(await self.redis.exists(keys.lmstfy_job(ns, queue, job_id)))

    async def find(self, ns: str, queue: str, job_id: str) -> JobInfo | None:
        """A job in lmstfy's layout shows its data and ttl; its state is "unknown" (lmstfy kept it
        only in which structure holds its element, and a timer member does not say which it is)."""
        job = await self._legacy_job(ns, queue, job_id, 0) if self.present else None
        return None if job is None else JobInfo(job, "unknown", None, 0, None)

    async def ready_ahead(self, ns: str, queue: str, limit: int) -> list[JobInfo]:
        """lmstfy's ready jobs (consumes take them first), tail first, past those whose data is gone."""
        found: list[JobInfo] = []
        if not self.present:
            return found
        elements = cast(list[bytes], await self.redis.lrange(keys.lmstfy_ready(ns, queue), -(limit + PEEK_SCAN), -1))
        for element in reversed(elements):
            tries, job_id = unpack_element(element)
            job = await self._legacy_job(ns, queue, job_id, tries)
            if job is not None:
                found.append(JobInfo(job, "ready", None, 0, None))
                if len(found) == limit:
                    break
        return found

    async def _legacy_job(self, ns: str, queue: str, job_id: str, tries: int) -> Job | None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(keys.lmstfy_job(ns, queue, job_id))
        pipe.pttl(keys.lmstfy_job(ns, queue, job_id))
        raw, pttl = await pipe.execute()
        if raw is None:
            return None
        body, attributes = decode_legacy_data(job_id, raw)
        return Job(ns, queue, job_id, body, ttl_seconds(int(pttl)), tries, attributes)

    async def ready_count(self, ns: str, queue: str) -> int:
        """lmstfy's delayed and reserved jobs are not counted: its one timer_set is not kept per queue."""
        return int(await self.redis.llen(keys.lmstfy_ready(ns, queue))) if self.present else 0

    async def adopt_dead(self, ns: str, queue: str) -> None:
        if self.present:
            await adopt_dead_letter(self.engine, ns, queue)

    async def names(self, ns: str | None) -> set[str]:
        registry = keys.LMSTFY_NAMESPACES if ns is None else keys.lmstfy_queues(ns)
        return {_text(name) for name in await self.redis.hkeys(registry)}

    async def drop_queue(self, ns: str, queue: str) -> int:
        dropped = await self._drop_list(keys.lmstfy_ready(ns, queue), ns, queue)
        await self.redis.hdel(keys.lmstfy_queues(ns), queue)  # as lmstfy's destroy does
        return dropped

    async def _drop_list(self, list_key: str, ns: str, queue: str) -> int:
        prefix = keys.lmstfy_job(ns, queue, "")
        total, left = 0, 1
        while left:
            chunk = await self.engine.scripts.lmstfy_drop(
                self.engine.script_client, DropKeys((list_key,)), DropArgs("list", (prefix, CHUNK))
            )
            total, left = total + chunk.done, chunk.left
        return total

    async def drop_namespace(self, ns: str) -> int:
        """lmstfy's jobs of the namespace: its lists, its timer members, its registry entry."""
        total = 0
        for queue in [_text(q) for q in await self.redis.hkeys(keys.lmstfy_queues(ns))]:
            total += await self._drop_list(keys.lmstfy_ready(ns, queue), ns, queue)
            total += await self._drop_list(keys.lmstfy_dead(ns, queue), ns, queue)
        total += await self._drop_timer_members(ns)
        await self.redis.hdel(keys.LMSTFY_NAMESPACES, ns)
        await self.redis.delete(keys.lmstfy_queues(ns))
        return total

    async def _drop_timer_members(self, ns: str) -> int:
        prefix = len(ns.encode()).to_bytes(2, "little") + ns.encode()
        members = [
            member async for member, _ in self.redis.zscan_iter(keys.LMSTFY_TIMER) if bytes(member).startswith(prefix)
        ]
        total = 0
        for start in range(0, len(members), CHUNK):
            chunk = members[start : start + CHUNK]
            dropped = await self.engine.scripts.lmstfy_drop(
                self.engine.script_client, DropKeys((keys.LMSTFY_TIMER,)), DropArgs("members", tuple(chunk))
            )
            total += dropped.done
        return total


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def adopt_dead_letter(engine: Engine, ns: str, queue: str) -> int:
    """Moves lmstfy's dead letter of the queue behind lmstfy-py's; returns how many jobs moved."""
    legacy = keys.lmstfy_dead(ns, queue)
    if not await engine.redis.exists(legacy):
        return 0
    total, left = 0, 1
    while left:
        chunk = await engine.scripts.lmstfy_dead(
            engine.script_client,
            LmstfyDeadKeys(legacy, keys.dead(ns, queue)),
            LmstfyDeadArgs(ns, queue, CHUNK, now_ms()),
        )
        total, left = total + chunk.done, chunk.left
    if total:
        await engine.register_namespace(ns)
    return total


class LmstfyMover(tasks.OneLoop):
    """The loop of an lmstfy-format pool: pumps lmstfy's timer_set into lmstfy-py's layout, moves
    lmstfy's dead letters, and tells the pool's LmstfyLayout whether anything of lmstfy's remains."""

    def __init__(self, layout: LmstfyLayout, on_found: Callable[[], Awaitable[None]], unsure: bool = False) -> None:
        """`on_found` runs at each check that finds lmstfy's data; `unsure`: the pool was not
        known to hold any (its Redis was away at start), so finding none is not news."""
        self.layout = layout
        self.engine = layout.engine
        self.redis = layout.redis
        self.on_found = on_found
        self._next_check = 0.0
        # What the log last said: lmstfy's data present or not.
        self._reported: bool | None = False if unsure else None
        self.loop = tasks.Loop("lmstfy", self._step, layout.pool)

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
            pumped = await self.engine.scripts.lmstfy_pump(
                self.engine.script_client, TimerKeys(keys.LMSTFY_TIMER), LmstfyPumpArgs(now // 1000, PUMP_BATCH, now)
            )
            if pumped.moved < PUMP_BATCH:
                return float(pumped.next_due_s)

    async def check(self) -> None:
        """Moves lmstfy's dead letters; logs when lmstfy's data is found, and when none is left."""
        counts = await self.legacy_counts()
        present = bool(counts["ready"] or counts["timer"])
        self.layout.present = present
        if present:
            await self.on_found()
        if present and self._reported is not True:
            log.info(
                "pool %s holds jobs lmstfy left (%d ready, %d on its timer, %d dead): serving them in place,"
                " each moving into lmstfy-py's layout as it is consumed or comes due",
                self.layout.pool,
                counts["ready"],
                counts["timer"],
                counts["dead"],
            )
        elif not present and self._reported is not False:
            log.info("pool %s: nothing of lmstfy's layout remains; every job it left has moved", self.layout.pool)
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
