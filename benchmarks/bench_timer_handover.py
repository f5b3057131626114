#!/usr/bin/env python3
"""How late a due job reaches a waiting consume, inside one process: two source trees compared.

The engine's pump and --consumers long-polling consumes (count 1, then ACK) in one event loop,
--jobs jobs due 100-150 ms after publishing; lateness = when the consume returned minus the due
time (ms, wall clock). With --load, publish tasks in the same loop publish to another queue at
half the rate this process managed flat out just before (the request work the pump competes with).

Each tree's code (its lmstfy_py) runs in its own child process, on one shared Redis (AOF,
fsync always; --appendfsync everysec: what the fsyncs cost), the trees alternated --pairs
times; prints per round p50/p99/max and early, then the medians per tree.

    .venv/bin/python -m benchmarks.bench_timer_handover --trees ../main .
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
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


@dataclasses.dataclass
class Rig:
    """What a child round runs on: the engine and its pump, and the publish load when asked for."""

    engine: Any
    pump: Any
    stop: asyncio.Event
    loading: asyncio.Task[None] | None
    rate: float

    async def close(self) -> None:
        self.stop.set()
        if self.loading:
            await self.loading
        await self.pump.stop()
        await self.engine.close()


async def rig(url: str, load: bool) -> Rig:
    """An engine on an emptied Redis with its pump running and, with `load`, the publish load started."""
    from lmstfy_py.config import PoolConfig
    from lmstfy_py.store import pools
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
    return Rig(engine, pump, stop, loading, rate)


async def publish_due(engine: Any, jobs: int, due: dict[str, int]) -> None:
    """Publishes `jobs` jobs due 100-150 ms on, 10-30 ms apart; `due`: job id -> its due time (ms)."""
    from lmstfy_py import ids
    from lmstfy_py.types import NewJob

    for _ in range(jobs):
        delay = random.randint(100, 150)
        job_id = (await engine.publish(NS, QUEUE, NewJob(b"t", delay_ms=delay))).job_id
        # The job's own due time: its created ms (the publish's clock, in its id) plus its delay.
        due[job_id] = ids.timestamp_ms(job_id) + delay
        await asyncio.sleep(random.uniform(0.01, 0.03))


async def due_round(running: Rig, jobs: int, consumers: int, answered: Callable[[Any, float, int], None]) -> None:
    """`consumers` long-polling consumes (count 1, then ACK) take `jobs` due jobs published meanwhile;
    `answered(job, when its consume returned (unix ms), its due ms)` for each. Closes `running`."""
    engine = running.engine
    due: dict[str, int] = {}
    done = 0

    async def consumer() -> None:
        nonlocal done
        while done < jobs:
            got = await engine.consume(NS, [QUEUE], 60_000, 1000, 1)
            returned = time.time() * 1000
            for job in got:
                done += 1
                answered(job, returned, due[job.job_id])
                await engine.ack(NS, QUEUE, job.job_id)

    tasks = [asyncio.create_task(consumer()) for _ in range(consumers)]
    await asyncio.sleep(0.2)
    await publish_due(engine, jobs, due)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    await running.close()


async def child(url: str, jobs: int, consumers: int, load: bool) -> dict[str, Any]:
    running = await rig(url, load)
    lateness: list[float] = []
    await due_round(running, jobs, consumers, lambda _, returned, due: lateness.append(int(returned) - due))
    return {
        "p50": statistics.median(lateness),
        "p99": percentile(lateness, 0.99),
        "max": max(lateness),
        "early": sum(1 for ms in lateness if ms < 0),
        "load_rate": running.rate,
    }


def run_tree(script: str, tree: str, redis: Any, args: argparse.Namespace, load: bool) -> dict[str, Any]:
    """One round of `script`'s child on `tree`'s code (PYTHONPATH=tree)."""
    command = [
        sys.executable,
        script,
        "--child",
        redis.url,
        "--jobs",
        str(args.jobs),
        "--consumers",
        str(args.consumers),
    ]
    root = str(Path(tree).resolve())
    env = dict(os.environ, PYTHONPATH=_import_path(root))
    out = subprocess.run([*command, *(["--load"] if load else [])], env=env, cwd=root, check=False, capture_output=True)
    if out.returncode != 0:  # the child's own words, not only its exit status
        sys.exit(f"{script} --child failed (exit {out.returncode}):\n{out.stderr.decode()}")
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


@functools.cache
def _import_path(root: str) -> str:
    """A directory whose lmstfy_py is `root`'s and whose benchmarks are this tree's (two links): the
    children of every tree run this tree's benchmark code on that tree's server code."""
    path = Path(tempfile.mkdtemp(prefix="tree-"))
    (path / "lmstfy_py").symlink_to(Path(root) / "lmstfy_py")
    (path / "benchmarks").symlink_to(Path(__file__).resolve().parent)
    return str(path)


def parser(description: str) -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=description)
    found.add_argument("--trees", nargs="+", default=["."], help="source trees (default: this one)")
    found.add_argument("--jobs", type=int, default=60)
    found.add_argument("--consumers", type=int, default=4)
    found.add_argument("--pairs", type=int, default=3)
    found.add_argument("--child", metavar="URL")
    found.add_argument("--appendfsync", choices=["always", "everysec"], default="always")
    found.add_argument("--load", action="store_true", help="(a child's) publish load at half capacity")
    return found


Rounds = Callable[[str, Any, argparse.Namespace, bool], dict[str, Any]]


def alternate(args: argparse.Namespace, run: Rounds, summary: Callable[[list[dict[str, Any]]], str]) -> None:
    """On one Redis (AOF, args.appendfsync), idle then loaded, args.pairs rounds of each tree,
    alternated; prints each round and then each tree's `summary` of its rounds."""
    from benchmarks.harness.redis_servers import RedisProcess

    redis = RedisProcess(Path(tempfile.mkdtemp(prefix="handover-")), persistent=True)
    redis.extra_args = ["--appendfsync", args.appendfsync]
    redis.start()
    try:
        for load in (False, True):
            figures: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
            for round_ in range(args.pairs):
                for tree in args.trees if round_ % 2 == 0 else list(reversed(args.trees)):
                    found = run(tree, redis, args, load)
                    figures[tree].append(found)
                    print(f"{'load' if load else 'idle'} {tree}: {found}", flush=True)
            for tree, rounds in figures.items():
                print(f"== {'load' if load else 'idle'} {tree}: {summary(rounds)}", flush=True)
    finally:
        redis.stop()


def _summary(rounds: list[dict[str, Any]]) -> str:
    p50 = statistics.median(r["p50"] for r in rounds)
    p99 = statistics.median(r["p99"] for r in rounds)
    return f"median p50 {p50:.1f} ms, p99 {p99:.1f} ms, early {sum(r['early'] for r in rounds)}"


Child = Callable[[str, int, int, bool], Awaitable[dict[str, Any]]]


def main_of(doc: str, child: Child, run: Rounds, summary: Callable[[list[dict[str, Any]]], str]) -> None:
    """A benchmark's main: as a child (--child URL) one round, printed as JSON; else the alternated rounds."""
    args = parser(doc.split("\n\n")[0]).parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.jobs, args.consumers, args.load))))
        return
    alternate(args, run, summary)


def main() -> None:
    main_of(__doc__, child, functools.partial(run_tree, __file__), _summary)


if __name__ == "__main__":
    main()
