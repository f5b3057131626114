#!/usr/bin/env python3
"""How late a due job reaches a waiting consume, inside one process: two source trees compared.

The engine's pump and --consumers long-polling consumes (count 1, then ACK) in one event loop,
--jobs jobs due 100-150 ms after publishing; lateness = when the consume returned minus the due
time (ms, wall clock). With --load, publish tasks in the same loop publish to another queue at
half the rate this process managed flat out just before (the request work the pump competes with).

Each tree's code runs in its own child process (PYTHONPATH=tree), on one shared Redis (AOF,
fsync always; --appendfsync everysec: what the fsyncs cost), the trees alternated --pairs
times; prints per round p50/p99/max and early, then the medians per tree.

    .venv/bin/python -m benchmarks.bench_timer_handover --trees ../main .
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NS, QUEUE, LOAD_QUEUE = "bench", "due", "load"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def capacity(engine: Any, new_job: Any, seconds: float = 1.0, callers: int = 16) -> float:
    """Publishes per second this process manages flat out (callers at once)."""
    done = 0
    end = time.monotonic() + seconds

    async def caller() -> None:
        nonlocal done
        while time.monotonic() < end:
            await engine.publish(NS, LOAD_QUEUE, new_job(b"x"))
            done += 1

    await asyncio.gather(*(caller() for _ in range(callers)))
    return done / seconds


async def publish_load(engine: Any, new_job: Any, rate: float, stop: asyncio.Event, callers: int = 8) -> None:
    """Publishes at about `rate` a second until `stop`, each caller on its own schedule."""
    interval = callers / rate

    async def caller() -> None:
        at = time.monotonic()
        while not stop.is_set():
            await engine.publish(NS, LOAD_QUEUE, new_job(b"x"))
            at += interval
            await asyncio.sleep(max(0.0, at - time.monotonic()))

    await asyncio.gather(*(caller() for _ in range(callers)))


async def child(url: str, jobs: int, consumers: int, load: bool) -> dict[str, Any]:
    from lmstfy_py.config import PoolConfig
    from lmstfy_py.store import pools
    from lmstfy_py.store.engine import now_ms
    from lmstfy_py.store.pump import Pump
    from lmstfy_py.types import NewJob

    engine = pools.engine("default", PoolConfig("default", url=url))
    await engine.redis.flushall()
    pump = Pump(engine)
    pump.start()
    stop = asyncio.Event()
    rate = 0.0
    loading = None
    if load:
        rate = await capacity(engine, NewJob) / 2
        await engine.redis.flushall()  # the capacity run's jobs
        loading = asyncio.create_task(publish_load(engine, NewJob, rate, stop))
    delays: dict[str, int] = {}
    lateness: list[float] = []

    async def consumer() -> None:
        while len(lateness) < jobs:
            got = await engine.consume(NS, [QUEUE], 60_000, 1000, 1)
            for job in got:
                # The job's own due time: its created ms (the publish's clock) plus its delay.
                lateness.append(now_ms() - (job.created_ms or 0) - delays[job.job_id])
                await engine.ack(NS, QUEUE, job.job_id)

    tasks = [asyncio.create_task(consumer()) for _ in range(consumers)]
    await asyncio.sleep(0.2)
    for _ in range(jobs):
        delay = random.randint(100, 150)
        job_id = (await engine.publish(NS, QUEUE, NewJob(b"t", delay_ms=delay))).job_id
        delays[job_id] = delay
        await asyncio.sleep(random.uniform(0.01, 0.03))
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    stop.set()
    if loading:
        await loading
    await pump.stop()
    await engine.close()
    return {
        "p50": statistics.median(lateness),
        "p99": percentile(lateness, 0.99),
        "max": max(lateness),
        "early": sum(1 for ms in lateness if ms < 0),
        "load_rate": rate,
    }


def run_tree(tree: str, url: str, args: argparse.Namespace, load: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", url, "--jobs", str(args.jobs), "--consumers", str(args.consumers)]
    root = str(Path(tree).resolve())
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([*command, *(["--load"] if load else [])], env=env, cwd=root, check=True, capture_output=True)
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", default=["."], help="source trees (default: this one)")
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--child", metavar="URL")
    parser.add_argument("--appendfsync", choices=["always", "everysec"], default="always")
    parser.add_argument("--load", action="store_true", help="(a child's) publish load at half capacity")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.jobs, args.consumers, args.load))))
        return
    from benchmarks.harness.redis_servers import RedisProcess

    redis = RedisProcess(Path(tempfile.mkdtemp(prefix="handover-")), persistent=True)
    redis.extra_args = ["--appendfsync", args.appendfsync]
    redis.start()
    try:
        for load in (False, True):
            figures: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
            for round_ in range(args.pairs):
                for tree in args.trees if round_ % 2 == 0 else list(reversed(args.trees)):
                    found = run_tree(tree, redis.url, args, load)
                    figures[tree].append(found)
                    print(f"{'load' if load else 'idle'} {tree}: {found}", flush=True)
            for tree, rounds in figures.items():
                p50 = statistics.median(r["p50"] for r in rounds)
                p99 = statistics.median(r["p99"] for r in rounds)
                early = sum(r["early"] for r in rounds)
                print(
                    f"== {'load' if load else 'idle'} {tree}: median p50 {p50:.1f} ms, p99 {p99:.1f} ms, early {early}"
                )
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
