"""An Engine's operations on a whole namespace: its registry, purge, timer pump and recurring jobs
(a part of Engine, store/engine.py)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.store import keys, replies, schedule_ops
from lmstfy_py.store.contracts.jobs import Reserved
from lmstfy_py.store.contracts.upkeep import (
    DestroyKeys,
    ForgetArgs,
    ForgetKeys,
    PumpArgs,
    PumpKeys,
    PurgeTimerArgs,
    TimerKeys,
)
from lmstfy_py.store.engine_base import CHUNK, EngineBase, PumpResult, now_ms, queue_keys
from lmstfy_py.store.handover import Mailbox
from lmstfy_py.store.jobdata import stored_trace
from lmstfy_py.store.scripts import Arg
from lmstfy_py.types import Job

PURGE_ROUNDS = 5  # purge passes while publishers, consumers or pumps use the namespace it empties


class NamespaceOps(EngineBase):
    async def namespaces(self) -> list[str]:
        names = _names(await self.redis.smembers(keys.NAMESPACES))
        return names if self.layout is None else sorted(set(names) | await self.layout.names(None))

    async def queues(self, ns: str) -> list[str]:
        names = await self._own_queues(ns)
        return names if self.layout is None else sorted(set(names) | await self.layout.names(ns))

    async def _own_queues(self, ns: str) -> list[str]:
        return _names(await self.redis.smembers(keys.queues(ns)))

    async def queue_exists(self, ns: str, queue: str) -> bool:
        """Whether a job was ever published to the queue (it is in the namespace's registry)."""
        if await self.redis.sismember(keys.queues(ns), queue):
            return True
        return self.layout is not None and queue in await self.layout.names(ns)

    async def timer_size(self, ns: str) -> int:
        return int(await self.redis.zcard(keys.timer(ns)))

    async def purge_namespace(self, ns: str) -> int:
        """Deletes every job of the namespace (delayed, ready, reserved, dead) and every key of it,
        CHUNK per script call; returns how many jobs were deleted.

        Each step is one script that deletes jobs with their elements, so whatever another process
        does meanwhile (publish, consume, pump), no job is left half deleted. Rounds repeat until
        the last step (forget_namespace.lua) finds nothing left; a namespace still in use after
        PURGE_ROUNDS keeps what was published meanwhile, intact.
        """
        total = await self.layout.drop_namespace(ns) if self.layout is not None else 0
        await schedule_ops.forget_namespace(self, ns)
        for _ in range(PURGE_ROUNDS):
            total += await self._purge_round(ns, await self._own_queues(ns))
            if await self._forget(ns):
                break
        pipe = self.redis.pipeline(transaction=False)
        pipe.srem(keys.NAMESPACES, ns)
        pipe.zrem(keys.DUE_INDEX, ns)
        await pipe.execute()
        self._registered.pop(ns, None)
        return total

    async def _forget(self, ns: str) -> bool:
        call_keys = ForgetKeys(keys.timer(ns), keys.queues(ns))
        prefixes = ForgetArgs(
            keys.ready_prefix(ns),
            keys.dead_prefix(ns),
            keys.wake_prefix(ns),
            keys.priority_prefix(ns),
            keys.meta_prefix(ns),
        )
        return await self.scripts.forget_namespace(self.script_client, call_keys, prefixes)

    async def _purge_round(self, ns: str, queues: Sequence[str]) -> int:
        total, left = 0, 1
        while left:
            chunk = await self.scripts.purge_timer(
                self.script_client,
                TimerKeys(keys.timer(ns)),
                PurgeTimerArgs(CHUNK, keys.job_prefix(ns), keys.meta_prefix(ns)),
            )
            total, left = total + chunk.done, chunk.left
        for queue in queues:
            # destroy.lua empties any list of (tries, id) elements with their jobs' data: dead letters too.
            total += await self._destroy_ours(ns, queue, record=False)
            total += await self._drain(DestroyKeys(keys.dead(ns, queue), keys.wake(ns, queue)), "l", ns, queue, False)
        return total

    async def pump(self, ns: str, now: int) -> PumpResult:
        """Moves every due timer member of the namespace, CHUNK per script call, handing the jobs it
        makes ready to this process's waiting consumes in the same calls (store/handover.py). A
        member that came due while a call ran is moved by another call at once."""
        args = PumpArgs(
            now,
            CHUNK,
            keys.job_prefix(ns),
            keys.ready_prefix(ns),
            keys.dead_prefix(ns),
            keys.wake_prefix(ns),
            keys.priority_prefix(ns),
            keys.meta_prefix(ns),
            ns,
            (),
        )
        to_ready = to_dead = 0
        while True:
            waiters = self.handover.claim(ns)
            call_keys, call_args = _with_waiters(ns, now, waiters, args)
            start_ns = time.time_ns()
            try:
                pumped = await self.scripts.pump(self.script_client, call_keys, call_args)
            except BaseException:
                self.handover.unclaim(waiters)
                raise
            to_ready, to_dead = to_ready + pumped.ready, to_dead + pumped.dead
            self.traced("dead", ns, start_ns, [(q.decode(), i.decode(), stored_trace(w)) for q, i, w in pumped.died])
            await self._hand_over(ns, waiters, pumped.handed, start_ns)
            # Due now rather than after the pump's index bookkeeping (a round trip, an fsync): the
            # jobs that came due while the pump was busy were its latest (docs/PERFORMANCE.md).
            now = max(now, now_ms())
            if pumped.next_due == -1 or pumped.next_due > now:
                result = PumpResult(to_ready, to_dead, pumped.next_due)
                self.observer.pumped(self.pool, ns, result)
                return result

    async def _hand_over(
        self, ns: str, waiters: Sequence[Mailbox], handed: Sequence[Sequence[Reserved]], start_ns: int
    ) -> None:
        """The reservations a step (the pump's, a publish's) made for the waiting consumes it
        claimed, `handed` in their order (a step may stop short of the last): each delivered, or
        given back when its consume has left. Their consume step (SPEC 15's span) was that step."""
        self.handover.unclaim([mailbox for mailbox, reserved in itertools.zip_longest(waiters, handed) if not reserved])
        for mailbox, reserved in zip(waiters, handed, strict=False):
            if reserved:
                jobs = [replies.reserved_job(ns, r) for r in reserved]
                self.traced_jobs("consume", ns, start_ns, jobs)
                if not self.handover.deliver(ns, mailbox, jobs):
                    await self._give_back(ns, jobs, mailbox.frozen)

    async def _give_back(self, ns: str, jobs: Sequence[Job], frozen: bool) -> None:
        """Jobs handed to a consume that left before answering them: ready again at once (Engine)."""
        raise NotImplementedError

    async def timer_head(self, ns: str) -> int:
        """Due ms of the namespace's earliest timer member, -1 when empty."""
        head = await self.redis.zrange(keys.timer(ns), 0, 0, withscores=True)
        return int(head[0][1]) if head else -1

    # -- recurring jobs (store/schedule_ops.py) --------------------------------------------------

    async def put_schedule(self, ns: str, schedule: Schedule, cap: int = 0) -> tuple[bool, int]:
        """Registers or replaces a schedule; returns whether it is new, and its first tick (ms).
        `cap`: the most schedules the namespace may hold for a new one to be added (0: no cap)."""
        return await schedule_ops.put(self, ns, schedule, now_ms(), cap)

    async def schedules(self, ns: str, queue: str | None = None) -> list[ScheduleState]:
        return await schedule_ops.listed(self, ns, queue)

    async def schedule(self, ns: str, queue: str, name: str) -> ScheduleState:
        return await schedule_ops.one(self, ns, queue, name)

    async def delete_schedule(self, ns: str, queue: str, name: str) -> None:
        await schedule_ops.delete(self, ns, queue, name)


def _with_waiters(ns: str, now: int, waiters: Sequence[Mailbox], args: PumpArgs) -> tuple[PumpKeys, PumpArgs]:
    """The pump call at `now` handing due jobs to `waiters`: their queues' keys, and what each asks for."""
    per_queue: list[str] = []
    asks: list[Arg] = []
    for mailbox in waiters:
        asks += [now + mailbox.ttr_ms, mailbox.count, "1" if mailbox.frozen else "0", len(mailbox.queues)]
        asks += mailbox.queues
        per_queue += [key for queue in mailbox.queues for key in queue_keys(ns, queue)]
    return PumpKeys(keys.timer(ns), tuple(per_queue)), args._replace(now=now, waiters=tuple(asks))


def _names(members: set[Any]) -> list[str]:
    """Set members as text, sorted (the clients answer bytes: no decode_responses)."""
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
