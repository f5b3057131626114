"""An Engine's job-outcome operations (a part of Engine, store/engine.py; SPEC 13): a queue's
settings, `complete` (an ACK that keeps a result), and `result` (a job's end, waited for).

A queue's settings are one hash (keys.settings) that the publish step reads itself when a
publish names no keep, so a change reaches every process at once.
"""

from __future__ import annotations

from lmstfy_py.store import keys
from lmstfy_py.store.engine_base import EngineBase, as_int
from lmstfy_py.types import JobInfo, QueueSettings


class OutcomeOps(EngineBase):
    async def queue_settings(self, ns: str, queue: str) -> QueueSettings:
        keep, events = await self.redis.hmget(keys.settings(ns, queue), ["keep", "events"])
        return QueueSettings(as_int(keep) or 0, as_int(events) or 0)

    async def set_queue_settings(self, ns: str, queue: str, keep_s: int | None, events: int | None) -> QueueSettings:
        """Sets those not None (values already validated by the web layer); answers all of them."""
        changes = [
            part
            for name, value in (("keep", keep_s), ("events", events))
            if value is not None
            for part in (name, value)
        ]
        if changes:
            await self.redis.execute_command("HSET", keys.settings(ns, queue), *changes)
        return await self.queue_settings(ns, queue)

    async def complete(self, ns: str, queue: str, job_id: str, result: bytes) -> None:
        """ACK that keeps `result`: NotFound when there is no such job, Conflict when it is not reserved."""
        raise NotImplementedError("complete")

    async def result(self, ns: str, queue: str, job_id: str, wait_ms: int) -> tuple[bool, JobInfo]:
        """(ended, info) of a job, waiting up to wait_ms for its end (store/jobstore.py)."""
        raise NotImplementedError("result")
