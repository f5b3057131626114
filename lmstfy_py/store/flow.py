"""An Engine's flow-control operations (a part of Engine, store/engine.py; SPEC 14): promote a delayed
job, and how many groups are in flight (the dashboard's figure).

The limits themselves (max_reserved, rate, groups) are no operation: they are decided inside the
reserve step (lua/_lib.lua's reserve_from_queue), so they hold across every process.
"""

from __future__ import annotations

from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys
from lmstfy_py.store.engine_base import EngineBase


class FlowOps(EngineBase):
    async def promote(self, ns: str, queue: str, job_id: str) -> None:
        """A delayed job is ready now, as if it had come due (store/jobstore.py)."""
        raise NotFound("job not found")  # (the interface's stub: promote.lua comes next)

    async def groups_in_flight(self, ns: str, queue: str) -> int:
        """Groups with a job reserved or holding its slot through a release delay: the slots hash's fields."""
        return int(await self.redis.hlen(keys.group_slots(ns, queue)))
