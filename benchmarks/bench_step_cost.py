#!/usr/bin/env python3
"""Redis CPU per job step: FCALL (or EVALSHA) µs per call (INFO commandstats) for publishes, then for
consumes that each reserve one job and ACK it, then per job end to end (long-polling consumes, to
which each publish hands its job in its own step), through an Engine of the code it is run from, on
a redis-server of its own. No HTTP: the Lua steps' own cost, for an A/B of two worktrees run
alternately (each from its root, PYTHONPATH=.), as docs/PERFORMANCE.md's issue-28 part does. Each
phase also gives the Redis process's CPU per job (/proc: its event loop and replies too).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_step_cost.py LABEL [--jobs 20000] [--traced] [--publishers 32]

`--traced` publishes every job with a sampled W3C trace context (SPEC 15): what a traced job's
steps cost Redis against a plain job's. `--publishers` sets how many publish end to end (32
consumes wait): 2 hands almost every job over in its publish's step; 32 leaves a backlog.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from benchmarks.bench import cpu_seconds
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.types import NewJob, TraceContext

NS, QUEUE, TASKS = "bench", "q", 32
SAMPLED = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=00f067aa0ba902b7")


async def phase(engine: Engine, jobs: int, *works: tuple[Callable[[], Awaitable[None]], int]) -> str:
    """Each `work` run by its number of tasks, jobs in all: the steps' µs per call and per job, the
    Redis process's CPU per job, and the rate."""
    await engine.redis.execute_command("CONFIG", "RESETSTAT")
    redis_pid = int((await engine.redis.execute_command("INFO", "server"))["process_id"])
    cpu, started = cpu_seconds(redis_pid), time.perf_counter()

    async def task(work: Callable[[], Awaitable[None]], each: int) -> None:
        for _ in range(each):
            await work()

    await asyncio.gather(*(task(work, jobs // tasks) for work, tasks in works for _ in range(tasks)))
    seconds, cpu = time.perf_counter() - started, cpu_seconds(redis_pid) - cpu
    found = await engine.redis.execute_command("INFO", "commandstats")
    # FCALL where Redis has functions (store/function_library.py), EVALSHA before them or without
    steps = [found.get(f"cmdstat_{command}", {}) for command in ("fcall", "evalsha")]
    calls = sum(int(stats.get("calls", 0)) for stats in steps)
    usec = sum(float(stats.get("usec", 0)) for stats in steps)
    per_job = f"{usec / jobs:.2f} µs/job, Redis process {1e6 * cpu / jobs:.1f} µs/job"
    return f"{usec / max(calls, 1):.2f} µs/call, {per_job} ({calls} calls, {jobs / seconds:,.0f} jobs/s)"


@contextlib.asynccontextmanager
async def engine_on_own_redis() -> AsyncIterator[Engine]:
    """An Engine of the code run, on a redis-server of its own, stopped after."""
    with tempfile.TemporaryDirectory() as workdir:
        redis = RedisProcess(Path(workdir))
        redis.start()
        engine = pools.engine("default", PoolConfig("default", url=redis.url))
        try:
            yield engine
        finally:
            await engine.close()
            redis.stop()


async def run(label: str, jobs: int, trace: TraceContext | None, publishers: int) -> None:
    async with engine_on_own_redis() as engine:

        async def publish() -> None:
            await engine.publish(NS, QUEUE, NewJob(b"x" * 100, trace=trace))

        async def consume_ack() -> None:
            [job] = await engine.consume(NS, [QUEUE], 60_000, 0, 1)
            await engine.ack(NS, QUEUE, job.job_id)

        async def wait_ack() -> None:  # a long-poll, handed its job by a publish as it waits
            [job] = await engine.consume(NS, [QUEUE], 60_000, 30_000, 1)
            await engine.ack(NS, QUEUE, job.job_id)

        published = await phase(engine, jobs, (publish, TASKS))
        print(f"{label}: publish {published}, consume+ACK {await phase(engine, jobs, (consume_ack, TASKS))}")
        ended = await phase(engine, jobs, (publish, publishers), (wait_ack, TASKS))
        print(f"{label}: end to end, {publishers} publishing {ended}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("label")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--traced", action="store_true", help="every job with a sampled trace context")
    parser.add_argument("--publishers", type=int, default=TASKS, help="end to end, for 32 waiting consumes")
    args = parser.parse_args()
    if not 1 <= args.publishers <= TASKS:  # more would publish fewer jobs than the consumes wait for
        parser.error(f"--publishers: 1 to {TASKS}")
    asyncio.run(run(args.label, args.jobs, SAMPLED if args.traced else None, args.publishers))


if __name__ == "__main__":
    main()
