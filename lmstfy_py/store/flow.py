"""An Engine's flow-control operations (a part of Engine, store/engine.py; SPEC 14): promote a delayed
job, how many groups are in flight (the dashboard's figure), and the due buckets of stats.

The limits themselves (max_reserved, rate, groups) are no operation: they are decided inside the
reserve step (lua/_lib.lua's reserve_from_queue), so they hold across every process.
"""

from __future__ import annotations

from lmstfy_py.store import keys, replies
from lmstfy_py.store.contracts import jobs as contract
from lmstfy_py.store.engine_base import EngineBase, now_ms, queue_keys
from lmstfy_py.types import DueBuckets

DUE_PAGE = 1000  # due seconds read per HSCAN call: a queue with very many never blocks Redis long
# The buckets' upper bounds (ms until due): within a minute, an hour, a day; "later" is the rest.
BUCKET_BOUNDS_MS = (60_000, 3_600_000, 86_400_000)


class FlowOps(EngineBase):
    async def promote(self, ns: str, queue: str, job_id: str) -> None:
        """A delayed job is ready now, as if it had come due (store/jobstore.py). A job still in
        lmstfy's layout is not found here (404), as touch and release answer for it."""
        job, queue_part = keys.job(ns, queue, job_id), queue_keys(ns, queue)
        call_keys = contract.ReleaseKeys(job, keys.timer(ns), *queue_part, keys.dead(ns, queue))
        args = contract.PromoteArgs(ns, queue, job_id, now_ms())
        replies.checked(await self.scripts.promote(self.script_client, call_keys, args))

    async def groups_in_flight(self, ns: str, queue: str) -> int:
        """Groups with a job reserved or holding its slot through a release delay: the slots hash's fields."""
        return int(await self.redis.hlen(keys.group_slots(ns, queue)))

    async def due_buckets(self, ns: str, queue: str, delayed: int) -> DueBuckets:
        """The queue's delayed jobs by time left until due, from its due-second counts (dd/{ns}/q), read
        in HSCAN pages. `later` is the rest of `delayed`, so the four always sum to it (delayed jobs
        stored before the counts existed are in no second)."""
        if delayed <= 0:
            return DueBuckets()
        now, within = now_ms(), [0, 0, 0]
        async for second, n in self.redis.hscan_iter(keys.due_seconds(ns, queue), count=DUE_PAGE):
            left = int(second) * 1000 - now
            for at, bound in enumerate(BUCKET_BOUNDS_MS):
                if left <= bound:
                    within[at] += int(n)
                    break
        minute, hour, day = within
        return DueBuckets(minute, hour, day, max(0, delayed - minute - hour - day))
