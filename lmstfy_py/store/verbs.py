"""An Engine's worker verbs on a reservation (a part of Engine, store/engine.py): ACK, ACK many,
release, touch and bury. Each is one Lua step; the steps that end a reservation or a job answer
the job's field w when its trace is sampled, so their spans (SPEC 15) cost no extra round trip.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from lmstfy_py.store import keys, replies
from lmstfy_py.store.contracts import jobs as contract
from lmstfy_py.store.engine_base import EngineBase, TracedJob, ack_call, now_ms, queue_keys
from lmstfy_py.store.jobdata import stored_trace
from lmstfy_py.types import Released


def acked_traces(queue: str, acked: contract.Acked) -> list[TracedJob]:
    """The jobs an ACK step removed with a sampled trace."""
    if not acked.traced:  # the usual case, without a comprehension's frame
        return []
    return [(queue, job_id.decode(), stored_trace(field)) for job_id, field in acked.traced]


def outcome_trace(queue: str, job_id: str, outcome: contract.Outcome) -> list[TracedJob]:
    return [] if outcome.trace is None else [(queue, job_id, stored_trace(outcome.trace))]


class VerbOps(EngineBase):
    async def ack(self, ns: str, queue: str, job_id: str) -> bool:
        return await self.ack_many(ns, queue, [job_id]) > 0

    async def ack_many(self, ns: str, queue: str, job_ids: Sequence[str]) -> int:
        """ACKs the jobs in one script call; returns how many still existed. Each id counts as one ACK."""
        if not job_ids:
            return 0
        start_ns = time.time_ns()
        acked = await self.scripts.ack(self.script_client, *ack_call(ns, queue, job_ids))
        self.traced("ack", ns, start_ns, acked_traces(queue, acked))
        self._count_acks(ns, queue, job_ids)
        # A job lives in one layout only: the counts add up.
        found = acked.found
        return found if self.layout is None else found + await self.layout.acked(ns, queue, job_ids)

    def _count_acks(self, ns: str, queue: str, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            self.observer.acked(self.pool, ns, queue, job_id)

    async def release(
        self, ns: str, queue: str, job_id: str, delay_ms: int | None, reason: str, untried: bool = False
    ) -> Released:
        """Ends a reservation without ACK: ready again after `delay_ms` (None: the job's backoff;
        at once when `untried`), or in the dead letter when no tries are left. `untried` gives
        back the try and the attempt the reservation took. 404 unknown, 409 not reserved."""
        now, start_ns = now_ms(), time.time_ns()
        call_keys = contract.ReleaseKeys(
            keys.job(ns, queue, job_id), keys.timer(ns), *queue_keys(ns, queue), keys.dead(ns, queue)
        )
        args = contract.ReleaseArgs(ns, queue, job_id, now, "" if delay_ms is None else delay_ms, reason, int(untried))
        outcome = replies.checked(await self.scripts.release(self.script_client, call_keys, args))
        buried = outcome.status == b"buried"
        self.traced("dead" if buried else "release", ns, start_ns, outcome_trace(queue, job_id, outcome))
        if buried:
            return Released(buried=True)
        if outcome.due_ms > now:
            await self._scheduled(ns, outcome.due_ms)
        return Released(buried=False, due_ms=outcome.due_ms, remain_tries=outcome.tries)

    async def touch(self, ns: str, queue: str, job_id: str, ttr_ms: int) -> int:
        """The reservation now ends ttr_ms from now, or when the job's ttl ends if sooner; returns when
        (unix ms). 404 unknown, 409 not reserved."""
        call_keys = contract.VerbKeys(keys.job(ns, queue, job_id), keys.timer(ns))
        args = contract.TouchArgs(ns, queue, job_id, now_ms() + ttr_ms)
        due_ms = replies.checked(await self.scripts.touch(self.script_client, call_keys, args)).due_ms
        await self._scheduled(ns, due_ms)
        return due_ms

    async def bury(self, ns: str, queue: str, job_id: str, reason: str) -> None:
        """The reserved job goes to the dead letter now. 404 unknown, 409 not reserved."""
        call_keys = contract.BuryKeys(
            keys.job(ns, queue, job_id), keys.timer(ns), keys.meta(ns, queue), keys.dead(ns, queue)
        )
        start_ns = time.time_ns()
        args = contract.BuryArgs(ns, queue, job_id, now_ms(), reason)
        outcome = replies.checked(await self.scripts.bury(self.script_client, call_keys, args))
        self.traced("bury", ns, start_ns, outcome_trace(queue, job_id, outcome))
