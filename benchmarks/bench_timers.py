#!/usr/bin/env python3
"""Timer precision and idle cost of lmstfy-py, measured on a real server.

1. Precision: publishes --jobs jobs with delays spread uniformly over --min-delay..--max-delay
   seconds (millisecond resolution, `delay_ms`), while --consumers long-poll consumers take
   them. For each job, lateness = its `elapsed_ms` when delivered (server clock, from the job
   id) minus its delay. Prints p50/p99/max lateness and how many were delivered early.
2. Idle cost: publishes --idle-jobs jobs due in an hour (bulk, 64 per request), waits, then
   measures the CPU time the server process and its Redis use over --idle-seconds.

Starts its own `lmstfy-py serve` (embedded Redis in a temporary dir) on loopback ports.

    .venv/bin/python benchmarks/bench_timers.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crash_test import ServerProcess, create_token, free_port
from loadclient import Connection

Address = tuple[str, int]

NS, QUEUE, IDLE_QUEUE = "timers", "due", "later"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def publish_spread(host: Address, token: str, args: argparse.Namespace, delays: dict[str, int]) -> None:
    """Fills `delays` (job id -> delay ms) as it goes: consumers look each job up when it arrives.

    Several publishers at once, so that publishing is over before most jobs fall due: the
    figure is about timers, not about a client saturating the machine's two cores meanwhile.
    """
    todo = iter(range(args.jobs))

    async def publisher() -> None:
        conn = Connection(*host)
        for _ in todo:
            delay_ms = random.randint(int(args.min_delay * 1000), int(args.max_delay * 1000))
            answer = await conn.request("PUT", f"/api/{NS}/{QUEUE}", {"token": token, "delay_ms": delay_ms}, b"t")
            assert answer.status == 201, answer
            delays[answer.json()["job_id"]] = delay_ms
        await conn.close()

    await asyncio.gather(*(publisher() for _ in range(args.publishers)))


async def consume_all(host: Address, token: str, delays: dict[str, int], lateness: list[float], total: int) -> None:
    conn = Connection(*host)
    while len(lateness) < total:
        answer = await conn.request("GET", f"/api/{NS}/{QUEUE}", {"token": token, "timeout": 1, "ttr": 60})
        if answer.status != 200:
            continue
        job = answer.json()
        lateness.append(job["elapsed_ms"] - delays[job["job_id"]])
        await conn.request("DELETE", f"/api/{NS}/{QUEUE}/job/{job['job_id']}", {"token": token})
    await conn.close()


async def precision(host: Address, token: str, args: argparse.Namespace) -> dict[str, float]:
    lateness: list[float] = []
    delays: dict[str, int] = {}
    # Consumers first: a job must find someone already waiting when it falls due.
    consumers = [
        asyncio.create_task(consume_all(host, token, delays, lateness, args.jobs)) for _ in range(args.consumers)
    ]
    await publish_spread(host, token, args, delays)
    await asyncio.wait_for(asyncio.gather(*consumers), args.max_delay + 30)
    return {
        "jobs": len(lateness),
        "early": sum(1 for late in lateness if late < 0),
        "p50_ms": statistics.median(lateness),
        "p99_ms": percentile(lateness, 0.99),
        "max_ms": max(lateness),
    }


async def idle_cost(host: Address, token: str, server_pid: int, args: argparse.Namespace) -> dict[str, float]:
    batch = json.dumps(["x"] * 64).encode()
    conn = Connection(*host)
    for _ in range(args.idle_jobs // 64):
        answer = await conn.request("PUT", f"/api/{NS}/{IDLE_QUEUE}/bulk", {"token": token, "delay": 3600}, batch)
        assert answer.status == 201, answer
    await conn.close()
    await asyncio.sleep(2)  # let the start-up and publish work settle
    redis_pids = children(server_pid)
    before = cpu_seconds(server_pid), sum(cpu_seconds(p) for p in redis_pids)
    await asyncio.sleep(args.idle_seconds)
    after = cpu_seconds(server_pid), sum(cpu_seconds(p) for p in redis_pids)
    return {
        "future_jobs": args.idle_jobs // 64 * 64,
        "server_cpu_pct": 100 * (after[0] - before[0]) / args.idle_seconds,
        "redis_cpu_pct": 100 * (after[1] - before[1]) / args.idle_seconds,
    }


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="lmstfy-timers-"))
    # --workers 1: one process: its CPU (and its child, Redis) is the idle figure
    server = ServerProcess(work / "data", free_port(), free_port(), work / "server.log", "--workers", "1")
    await server.start()
    try:
        token = await create_token(server.admin_port, NS)
        host = ("127.0.0.1", server.port)
        found = await precision(host, token, args)
        print(
            f"precision: {found['jobs']} jobs, delays {args.min_delay:g}-{args.max_delay:g} s: "
            f"lateness p50 {found['p50_ms']:.0f} ms, p99 {found['p99_ms']:.0f} ms, max {found['max_ms']:.0f} ms; "
            f"early: {found['early']}"
        )
        assert server.proc is not None
        idle = await idle_cost(host, token, server.proc.pid, args)
        print(
            f"idle: {idle['future_jobs']:.0f} future jobs: server {idle['server_cpu_pct']:.2f}% of a core, "
            f"redis {idle['redis_cpu_pct']:.2f}% of a core (over {args.idle_seconds:g} s)"
        )
    finally:
        server.stop()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--min-delay", type=float, default=1.0)
    parser.add_argument("--max-delay", type=float, default=5.0)
    parser.add_argument("--consumers", type=int, default=16)
    parser.add_argument("--publishers", type=int, default=16)
    parser.add_argument("--idle-jobs", type=int, default=100_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
