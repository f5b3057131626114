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
from lmstfy_py.store.scripts import Script

SCRIPT = Script("one", "return 1")


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


async def redis_py(url: str) -> Callable[[], Awaitable[Any]]:
    client, _ = pools.connect(PoolConfig("default", url=url))
    await client.script_load(SCRIPT.source)
    return lambda: SCRIPT(client, [], [])


async def pipelined(url: str) -> Callable[[], Awaitable[Any]]:
    client = PipelinedRedis(url)
    await client.script_load(SCRIPT.source)
    return lambda: SCRIPT(client, [], [])


async def main(args: argparse.Namespace) -> None:
    clients = {
        "redis-py pooled client": await redis_py(args.redis_url),
        "lmstfy-py pipelined": await pipelined(args.redis_url),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for _ in range(args.rounds):
        for name, call in clients.items():
            figures[name].append(await measure(call, args.callers, args.commands))
    base = statistics.median(cpu for _, cpu in figures["redis-py pooled client"])
    print(f"EVALSHA of a script returning 1, {args.callers} concurrent callers, median of {args.rounds} rounds:")
    for name, runs in figures.items():
        rate, cpu = statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs)
        print(f"  {name:<28} {rate:9,.0f} cmd/s  {cpu:5.1f} µs CPU per command  ({cpu / base:.2f} x redis-py)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--commands", type=int, default=64_000)
    parser.add_argument("--rounds", type=int, default=5)
    uvloop.run(main(parser.parse_args()))
