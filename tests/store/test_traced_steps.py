"""The store's part of SPEC 15's export: the Engine tells its observer of every step on a job whose
trace is sampled (store/engine_base.py's TracedStep), on every pool kind, and of none on any other
job. The steps that end a reservation or a job learn the trace from their own Lua step (field w);
a recording observer (a real EngineObserver) collects what the exporter would make spans of.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.engine import Engine, EngineObserver, TracedStep, now_ms
from lmstfy_py.types import NewJob, TraceContext

NS, Q = "tr", "q"
SAMPLED = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=1,congo=2")
UNSAMPLED = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "rojo=1")


class Recorder(EngineObserver):
    def __init__(self) -> None:
        self.steps: list[TracedStep] = []

    def traced(self, step: TracedStep) -> None:
        self.steps.append(step)

    def kinds(self) -> list[tuple[str, str]]:
        """(kind, job id) of each step told, in order; and checks what every step says besides."""
        for step in self.steps:
            assert (step.pool, step.ns, step.queue, step.trace) == ("default", NS, Q, SAMPLED)
            assert 0 < step.start_ns <= step.end_ns <= time.time_ns()
        return [(step.kind, step.job_id) for step in self.steps]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def engine(pool_config: PoolConfig, recorder: Recorder) -> AsyncIterator[Engine]:
    engine = pools.engine("default", pool_config, observer=recorder)
    yield engine
    await engine.close()


async def publish(engine: Engine, trace: TraceContext | None = SAMPLED, **job: int) -> str:
    return (await engine.publish(NS, Q, NewJob(b"x", trace=trace, **job))).job_id


async def reserve(engine: Engine, ttr_ms: int = 60_000) -> str:
    [job] = await engine.consume(NS, [Q], ttr_ms=ttr_ms, timeout_ms=0, count=1)
    return job.job_id


async def test_each_step_of_a_sampled_job_is_told_once(engine: Engine, recorder: Recorder) -> None:
    acked, carried, batch = await publish(engine), await publish(engine), await publish(engine, tries=3)
    assert await reserve(engine) == acked
    await engine.ack(NS, Q, acked)
    assert await reserve(engine) == carried
    # An ACK carried by a consume is told as an ACK, in the consume's step.
    [job] = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1, acks={Q: [carried]})
    assert job.job_id == batch and job.trace == SAMPLED
    released = await engine.release(NS, Q, batch, 0, "again")
    assert not released.buried and await reserve(engine) == batch
    await engine.bury(NS, Q, batch, "broken")
    await engine.respawn(NS, Q, 1, 60_000)
    assert await reserve(engine) == batch
    await engine.complete(NS, Q, batch, b"done")
    assert recorder.kinds() == [
        ("publish", acked),
        ("publish", carried),
        ("publish", batch),
        ("consume", acked),
        ("ack", acked),
        ("consume", carried),
        ("ack", carried),
        ("consume", batch),
        ("release", batch),
        ("consume", batch),
        ("bury", batch),
        ("consume", batch),
        ("complete", batch),
    ]


async def test_a_batch_ack_and_a_republish_are_told_per_job(engine: Engine, recorder: Recorder) -> None:
    first, second, third = await publish(engine), await publish(engine), await publish(engine)
    await engine.ack_many(NS, Q, [first, second, first])  # an id given twice is told once
    assert await reserve(engine) == third
    # A republish ACKs the job it replaces in its publish's step; one ACKed already is not told again.
    republished = (await engine.publish(NS, Q, NewJob(b"y", trace=SAMPLED), replaces=third)).job_id
    again = (await engine.publish(NS, Q, NewJob(b"z", trace=SAMPLED), replaces=third)).job_id
    told = [("publish", first), ("publish", second), ("publish", third), ("ack", first), ("ack", second)]
    told += [("consume", third), ("ack", third), ("publish", republished), ("publish", again)]
    assert recorder.kinds() == told


async def test_a_job_dying_at_its_ttr_or_at_a_release_with_no_try_left_is_told_dead(
    engine: Engine, recorder: Recorder
) -> None:
    at_ttr, at_release = await publish(engine), await publish(engine)
    assert await reserve(engine, ttr_ms=50) == at_ttr
    assert await reserve(engine) == at_release
    assert (await engine.release(NS, Q, at_release, 0, "no luck")).buried
    await asyncio.sleep(0.1)
    assert (await engine.pump(NS, now_ms())).to_dead == 1
    assert recorder.kinds()[-2:] == [("dead", at_release), ("dead", at_ttr)]
    assert (await engine.dead_letter(NS, Q)).size == 2


async def test_the_pumps_hand_over_to_a_waiting_consume_is_told_as_its_consume(
    engine: Engine, recorder: Recorder
) -> None:
    waiting = asyncio.create_task(engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=3000, count=1))
    await asyncio.sleep(0.05)
    job_id = await publish(engine, delay_ms=50)
    await asyncio.sleep(0.1)
    await engine.pump(NS, now_ms())
    [job] = await waiting
    assert job.job_id == job_id and recorder.kinds() == [("publish", job_id), ("consume", job_id)]


async def test_unsampled_and_untraced_jobs_are_told_of_nothing(engine: Engine, recorder: Recorder) -> None:
    for trace in (UNSAMPLED, None, UNSAMPLED, None):
        await publish(engine, trace=trace, tries=2)
    jobs = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=4)
    assert [job.trace for job in jobs] == [UNSAMPLED, None, UNSAMPLED, None]  # delivered all the same
    first, second, third, fourth = (job.job_id for job in jobs)
    await engine.ack_many(NS, Q, [first])
    await engine.release(NS, Q, second, 0, "")
    await engine.bury(NS, Q, third, "")
    await engine.complete(NS, Q, fourth, b"")
    await engine.consume(NS, [Q], ttr_ms=50, timeout_ms=0, count=1, acks={Q: [second]})
    await engine.publish(NS, Q, NewJob(b"z", tries=1, trace=UNSAMPLED))
    await reserve(engine, ttr_ms=10)
    await asyncio.sleep(0.05)
    assert (await engine.pump(NS, now_ms())).to_dead == 1
    assert recorder.steps == []
