"""The timer pump's steps against real Redis (standalone and clusters): what came due while it was
busy moves at once, and a namespace it planned to wake for but that another process emptied
meanwhile neither stalls it nor stays in the due index."""

from __future__ import annotations

import asyncio

from lmstfy_py.store import keys
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import NewJob


async def test_a_pump_call_moves_what_came_due_before_it_ended(engine: Engine) -> None:
    # A pump call told a time before the job's due time (as when the job came due while the call
    # ran) still moves it: the pump looks again at once instead of after its index bookkeeping.
    job_id = (await engine.publish("ns", "q", NewJob(b"due", delay_ms=50))).job_id
    await asyncio.sleep(0.1)
    result = await engine.pump("ns", now_ms() - 1_000)
    assert (result.to_ready, result.next_due_ms) == (1, -1)
    [job] = await engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=1)
    assert job.job_id == job_id


async def test_a_planned_namespace_emptied_elsewhere_is_dropped_and_the_next_served(engine: Engine, pump: Pump) -> None:
    await engine.publish("gone", "q", NewJob(b"never", delay_ms=300))
    later = (await engine.publish("kept", "q", NewJob(b"later", delay_ms=600))).job_id
    await asyncio.sleep(0.1)  # the pump sleeps now, planning to serve "gone" at its due time
    await engine.redis.delete(keys.timer("gone"))  # as if another process had served it
    [job] = await engine.consume("kept", ["q"], ttr_ms=60_000, timeout_ms=5_000, count=1)
    assert job.job_id == later
    assert await engine.redis.zscore(keys.DUE_INDEX, "gone") is None
