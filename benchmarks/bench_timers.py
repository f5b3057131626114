#!/usr/bin/env python3
"""Timer precision and idle cost of lmstfy-py, measured on a real server.

1. Precision: publishes --jobs jobs with delays spread uniformly over --min-delay..--max-delay
   seconds (millisecond resolution, `delay_ms`), while --consumers long-poll consumers take
   them. For each job, lateness = its `elapsed_ms` when delivered (server clock, from the job
   id) minus its delay. Prints p50/p99/max lateness and how many were delivered early.
2. Idle cost: publishes --idle-jobs jobs due in an hour (bulk, 64 per request), waits, then
   measures the CPU time the server process and its Redis use over --idle-seconds.

Starts its own `lmstfy-py serve` (embedded Redis in a temporary dir) on loopback ports.
`measure_precision()` returns the first figures (tests/e2e/test_timers.py asserts on them).

    .venv/bin/python -m benchmarks.bench_timers
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.lmstfy_servers import Server, create_token
from benchmarks.loadclient import Connection

Address = tuple[str, int]

NS, QUEUE, IDLE_QUEUE = "timers", "due", "later"
DELIVERY_GRACE_S = 30.0  # how long after the last due time consumers go on waiting for missing jobs


@dataclass(frozen=True)
class Precision:
    published: int
    delivered: int  # distinct jobs delivered
    duplicates: int  # deliveries beyond the first of a job
    early: int  # delivered before their delay
    p50_ms: float  # lateness percentiles (server clock: elapsed_ms at delivery - delay)
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class IdleCost:
    future_jobs: int
    server_cpu_pct: float
    redis_cpu_pct: float


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def publish_spread(
    host: Address, token: str, jobs: int, delays_s: tuple[float, float], publishers: int, delays: dict[str, int]
) -> None:
    """Fills `delays` (job id -> delay ms) as it goes: consumers look each job up when it arrives.

    Several publishers at once, so that publishing is over before most jobs fall due: the
    figure is about timers, not about a client saturating the machine's two cores meanwhile.
    """
    todo = iter(range(jobs))

    async def publisher() -> None:
        conn = Connection(*host)
        for _ in todo:
            delay_ms = random.randint(int(delays_s[0] * 1000), int(delays_s[1] * 1000))
            answer = await conn.request("PUT", f"/api/{NS}/{QUEUE}", {"token": token, "delay_ms": delay_ms}, b"t")
            assert answer.status == 201, answer
            delays[answer.json()["job_id"]] = delay_ms
        await conn.close()

    await asyncio.gather(*(publisher() for _ in range(publishers)))


async def consume_until(
    host: Address, token: str, delays: dict[str, int], lateness: dict[str, float], done: asyncio.Event
) -> Counter[str]:
    """Long-polls and ACKs until `done`; records each job's lateness; returns deliveries per job."""
    deliveries: Counter[str] = Counter()
    conn = Connection(*host)
    while not done.is_set():
        answer = await conn.request("GET", f"/api/{NS}/{QUEUE}", {"token": token, "timeout": 1, "ttr": 60})
        if answer.status != 200:
            continue
        job = answer.json()
        deliveries[job["job_id"]] += 1
        lateness.setdefault(job["job_id"], job["elapsed_ms"] - delays[job["job_id"]])
        await conn.request("DELETE", f"/api/{NS}/{QUEUE}/job/{job['job_id']}", {"token": token})
    await conn.close()
    return deliveries


async def measure_precision(
    host: Address, token: str, jobs: int, delays_s: tuple[float, float], consumers: int, publishers: int
) -> Precision:
    """Publishes `jobs` jobs due `delays_s` seconds later to waiting consumers; when each arrived.

    Waits for every job until DELIVERY_GRACE_S past the longest delay: a job that never comes
    shows as delivered < published.
    """
    lateness: dict[str, float] = {}
    delays: dict[str, int] = {}
    done = asyncio.Event()
    # Consumers first: a job must find someone already waiting when it falls due.
    tasks = [asyncio.create_task(consume_until(host, token, delays, lateness, done)) for _ in range(consumers)]
    try:
        await publish_spread(host, token, jobs, delays_s, publishers, delays)
        deadline = time.monotonic() + delays_s[1] + DELIVERY_GRACE_S
        while len(lateness) < len(delays) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        done.set()
        deliveries: Counter[str] = Counter()
        for part in await asyncio.gather(*tasks):
            deliveries.update(part)
    late = list(lateness.values()) or [0.0]
    return Precision(
        published=len(delays),
        delivered=len(lateness),
        duplicates=sum(deliveries.values()) - len(deliveries),
        early=sum(1 for ms in lateness.values() if ms < 0),
        p50_ms=statistics.median(late),
        p99_ms=percentile(late, 0.99),
        max_ms=max(late),
    )


async def measure_idle_cost(host: Address, token: str, server: Server, jobs: int, seconds: float) -> IdleCost:
    batch = json.dumps(["x"] * 64).encode()
    conn = Connection(*host)
    for _ in range(jobs // 64):
        answer = await conn.request("PUT", f"/api/{NS}/{IDLE_QUEUE}/bulk", {"token": token, "delay": 3600}, batch)
        assert answer.status == 201, answer
    await conn.close()
    await asyncio.sleep(2)  # let the start-up and publish work settle
    processes = server.pids()
    before = sum(map(cpu_seconds, processes)), cpu_seconds(server.redis_pid)
    await asyncio.sleep(seconds)
    after = sum(map(cpu_seconds, processes)), cpu_seconds(server.redis_pid)
    return IdleCost(
        future_jobs=jobs // 64 * 64,
        server_cpu_pct=100 * (after[0] - before[0]) / seconds,
        redis_cpu_pct=100 * (after[1] - before[1]) / seconds,
    )


async def run(args: argparse.Namespace) -> None:
    # --workers 1: one process: its CPU (and its child, Redis) is the idle figure
    workdir = Path(tempfile.mkdtemp(prefix="lmstfy-timers-"))
    with Server(workdir, args=["--workers", "1"], http_server=args.http_server) as server:
        server.start()
        token = create_token(server, NS, "bench_timers")
        host = ("127.0.0.1", server.port)
        delays_s = (args.min_delay, args.max_delay)
        found = await measure_precision(host, token, args.jobs, delays_s, args.consumers, args.publishers)
        print(
            f"precision: {found.delivered} of {found.published} jobs delivered ({found.duplicates} twice), "
            f"delays {args.min_delay:g}-{args.max_delay:g} s: lateness p50 {found.p50_ms:.0f} ms, "
            f"p99 {found.p99_ms:.0f} ms, max {found.max_ms:.0f} ms; early: {found.early}"
        )
        idle = await measure_idle_cost(host, token, server, args.idle_jobs, args.idle_seconds)
        print(
            f"idle: {idle.future_jobs} future jobs: server {idle.server_cpu_pct:.2f}% of a core, "
            f"redis {idle.redis_cpu_pct:.2f}% of a core (over {args.idle_seconds:g} s)"
        )
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
    parser.add_argument("--http-server", choices=["hypercorn", "uvicorn"], default="hypercorn")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
