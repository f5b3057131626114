#!/usr/bin/env python3
"""What one Redis round trip costs a worker: redis-py's pooled client (what Sentinel and Cluster
pools use, and standalone pools did before) against lmstfy-py's auto-pipelining client of
standalone pools (store/pipelined.py), both on uvloop with concurrent callers like a loaded
worker's.

redis-py gives each concurrent command a connection of its own: a write system call per
command and a read event per reply. The pipelined client writes the commands of one event-loop
turn at once on one connection and parses the replies of one read together.

    .venv/bin/python -m benchmarks.bench_redis_client --redis-url unix:///path/to/redis.sock
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.pipelined import PipelinedRedis
from lmstfy_py.store.scripts import Script, ScriptClient, run_pipeline

SCRIPT = Script("one", "return 1")
# A publish's shape: its script step, then the due index's ZADD in the same round trip (engine.py).
TAIL = [("ZADD", "{bench}:due", "1", "ns")]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(call: Callable[[], Awaitable[Any]], callers: int, commands: int) -> tuple[float, float]:
    """Commands per second and CPU microseconds per command, `callers` tasks in parallel."""
    each = commands // callers

    async def caller() -> None:
        for _ in range(each):
            await call()

    cpu, start = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    done = each * callers
    return done / (time.perf_counter() - start), 1e6 * (cpu_seconds() - cpu) / done


def calls(client: ScriptClient) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The two shapes of a standalone pool's script calls: one EVALSHA alone, and one pipelined with a tail."""
    return {
        "EVALSHA": lambda: SCRIPT(client, [], []),
        "EVALSHA + ZADD pipeline": lambda: run_pipeline(client, [(SCRIPT, [], [])], TAIL),
    }


async def main(args: argparse.Namespace) -> None:
    redis_py, _ = pools.connect(PoolConfig("default", url=args.redis_url))
    clients: dict[str, ScriptClient] = {
        "redis-py pooled client": redis_py,
        "lmstfy-py pipelined": PipelinedRedis(args.redis_url),
    }
    for client in clients.values():
        await client.script_load(SCRIPT.source)
    # Rounds alternate the clients (and the shapes), so that a neighbour's load on a shared
    # machine falls on both alike; the medians set aside a round it disturbed.
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, client in clients.items():
            for shape, call in calls(client).items():
                figures.setdefault((shape, name), []).append(await measure(call, args.callers, args.commands))
    print(f"{args.callers} concurrent callers, {args.commands:,} calls a round, median of {args.rounds} rounds:")
    for shape in calls(redis_py):
        base = statistics.median(cpu for _, cpu in figures[shape, "redis-py pooled client"])
        print(f"{shape}:")
        for name in clients:
            runs = figures[shape, name]
            rate, cpu = statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs)
            print(f"  {name:<28} {rate:9,.0f} calls/s  {cpu:5.1f} µs CPU per call  ({cpu / base:.2f} x redis-py)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--commands", type=int, default=64_000)
    parser.add_argument("--rounds", type=int, default=5)
    uvloop.run(main(parser.parse_args()))
