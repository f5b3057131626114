#!/usr/bin/env python3
"""result() waiters (SPEC 13): how soon after its job's end is each one answered, and what a kept
record costs in Redis memory.

Starts a redis-server of its own, has --waiters engine-level result() calls wait on as many
reserved jobs (each job one waiter, all in this process, as one server process holds them),
then completes the jobs one after another at --rate per second and prints the delay from each
complete's start to its waiter's answer (p50, p99, max). Then it keeps --records completed
records of 100-byte jobs and prints their Redis memory per record (INFO used_memory, before and
after). Figures only, no pass/fail.

    .venv/bin/python -m benchmarks.bench_result_waits --waiters 1000 --rate 2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.types import NewJob

NS, QUEUE = "bench", "q"
BODY = b"x" * 100


async def reserve_all(engine: Engine, count: int, keep_s: int) -> list[str]:
    await engine.publish_many(NS, QUEUE, [NewJob(BODY, keep_s=keep_s) for _ in range(count)])
    taken: list[str] = []
    while len(taken) < count:
        jobs = await engine.consume(NS, [QUEUE], ttr_ms=600_000, timeout_ms=0, count=min(100, count - len(taken)))
        taken += [job.job_id for job in jobs]
    return taken


async def waits(engine: Engine, count: int, rate: float) -> list[float]:
    """Seconds from each complete's start to its waiter's answer."""
    job_ids = await reserve_all(engine, count, keep_s=0)  # keep 0: the waiter alone gets the end
    answered: dict[str, float] = {}

    async def wait(job_id: str) -> None:
        ended, _ = await engine.result(NS, QUEUE, job_id, 60_000)
        assert ended
        answered[job_id] = time.perf_counter()

    waiters = [asyncio.create_task(wait(job_id)) for job_id in job_ids]
    await asyncio.sleep(2.0)  # every waiter subscribed and counted
    started: dict[str, float] = {}
    first = time.perf_counter()
    for i, job_id in enumerate(job_ids):
        ahead = first + i / rate - time.perf_counter()
        if ahead > 0:
            await asyncio.sleep(ahead)
        started[job_id] = time.perf_counter()
        await engine.complete(NS, QUEUE, job_id, b"result")
    await asyncio.gather(*waiters)
    return sorted(answered[job_id] - started[job_id] for job_id in job_ids)


async def used_memory(engine: Engine) -> int:
    return int((await engine.redis.info("memory"))["used_memory"])


async def bytes_per_job(engine: Engine, count: int, kept: bool) -> float:
    """Redis memory per completed record (kept) or per ready job of lmstfy's (not kept), 100-byte bodies."""
    await engine.redis.flushall()
    empty = await used_memory(engine)
    if kept:
        for job_id in await reserve_all(engine, count, keep_s=3600):
            await engine.complete(NS, QUEUE, job_id, b"")
    else:
        await engine.publish_many(NS, QUEUE, [NewJob(BODY, keep_s=0) for _ in range(count)])
    return (await used_memory(engine) - empty) / count


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        redis = RedisProcess(Path(workdir))
        redis.start()
        engine = pools.engine("default", PoolConfig("default", url=redis.url))
        try:
            for round_ in range(args.rounds):
                delays = await waits(engine, args.waiters, args.rate)
                ms = [d * 1000 for d in delays]
                print(
                    f"round {round_ + 1}: {args.waiters} waiters, completes at {args.rate:.0f}/s: answered after"
                    f" p50 {statistics.median(ms):.2f} ms, p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms,"
                    f" max {ms[-1]:.2f} ms"
                )
            record = await bytes_per_job(engine, args.records, kept=True)
            ready = await bytes_per_job(engine, args.records, kept=False)
            print(f"memory of {args.records} 100-byte jobs: {record:.0f} bytes per completed record,")
            print(f"  {ready:.0f} bytes per ready job (lmstfy's, for comparison)")
        finally:
            await engine.close()
            redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=2000.0, help="completes per second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=10_000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
