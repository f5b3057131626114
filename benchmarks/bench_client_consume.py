#!/usr/bin/env python3
"""The client's CPU per consume of 100 jobs, against a raw HTTP/1.1 loop doing the same requests.

    .venv/bin/python -m benchmarks.bench_client_consume                 # starts its own server
    .venv/bin/python -m benchmarks.bench_client_consume --url http://127.0.0.1:7777 --admin http://127.0.0.1:7778

A worker's consume loop, alone, on one connection: --jobs jobs prefilled, then drained by
`GET ?count=100` each carrying the ACKs of the jobs the one before brought (the worker's
consume), until none is left. Two ways, alternated round by round, each in a fresh namespace:
`client`, lmstfy-py's AsyncClient (`consume_many(ack=...)`: its own connection, the answer parsed
by httptools and read into Jobs),
and `raw`, bench.py's own keep-alive connection (the bytes, `json.loads`, the ids). It prints the
CPU of this process per job and per consume (what the client costs the machine its worker runs
on) and the wall time per consume; then the medians, and client ÷ raw.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

from benchmarks import bench
from benchmarks.bench import Target
from benchmarks.bench_worker import QUEUE, ack_held, carrying_consume, fresh_namespace, prefill
from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import AsyncClient

COUNT = 100  # what a worker's consume asks for, as carrying_consume does

Drain = Callable[[Target, str, int], Awaitable[int]]  # jobs -> consumes sent


async def with_client(t: Target, url: str, jobs: int) -> int:
    consumes, got, held = 0, 0, []
    async with AsyncClient(url, t.ns, t.token) as client:
        while got < jobs:
            found = await client.consume_many([QUEUE], COUNT, ttr=bench.TTR, timeout=0, ack=held)
            held = [(job.queue, job.id) for job in found]
            got, consumes = got + len(found), consumes + 1
        await client.ack_many(QUEUE, [job_id for _, job_id in held])
    return consumes


async def with_raw(t: Target, url: str, jobs: int) -> int:
    conn, rec = t.connect(), bench.Recorder(float("inf"))
    consumes, got, held = 0, 0, []
    while got < jobs:
        found = await carrying_consume(t, rec, conn, held)
        if found is None:
            raise RuntimeError(f"no job left after {got} of {jobs}")
        held = found
        got, consumes = got + len(held), consumes + 1
    await ack_held(t, rec, conn, held)
    await conn.close()
    return consumes


WAYS: dict[str, Drain] = {"client": with_client, "raw": with_raw}


async def one_run(t: Target, url: str, jobs: int, drain: Drain) -> tuple[float, float, float]:
    """CPU µs per job, CPU ms per consume, wall ms per consume (the prefill not counted)."""
    await prefill(t, jobs)
    cpu, wall = time.process_time(), time.perf_counter()
    consumes = await drain(t, url, jobs)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / jobs * 1e6, cpu / consumes * 1e3, wall / consumes * 1e3


def run_rounds(args: argparse.Namespace, url: str, admin: str) -> None:
    base = Target(bench.address_of(url), "", "", 8, 0.0, 0)
    print(f"bench_client_consume: {args.jobs:,} jobs a run; {bench.machine()}", flush=True)
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in WAYS}
    for round_no in range(1, args.rounds + 1):
        order = list(WAYS) if round_no % 2 else list(WAYS)[::-1]  # who goes first alternates
        for name in order:
            with fresh_namespace(base, admin, name) as t:
                figures = uvloop.run(one_run(t, url, args.jobs, WAYS[name]))
            found[name].append(figures)
            per_job, per_consume, wall = figures
            print(
                f"round {round_no}: {name:<7} cpu {per_job:5.1f} µs/job, {per_consume:5.2f} ms/consume; "
                f"wall {wall:5.2f} ms/consume",
                flush=True,
            )
    for name, runs in found.items():
        per_job, per_consume = statistics.median(f[0] for f in runs), statistics.median(f[1] for f in runs)
        print(f"median {name:<7} cpu {per_job:5.1f} µs/job, {per_consume:5.2f} ms/consume")
    ratios = [c[0] / r[0] for c, r in zip(found["client"], found["raw"], strict=True)]
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"client ÷ raw, CPU per job: {statistics.median(ratios):.2f} (rounds: {shown})", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="data API of a running server (default: start one)")
    parser.add_argument("--admin", help="its admin API")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if bool(args.url) != bool(args.admin):
        parser.error("give both --url and --admin, or neither")
    if args.url:
        run_rounds(args, args.url, args.admin)
        return
    with tempfile.TemporaryDirectory(prefix="bench-client-") as workdir, Server(Path(workdir)) as server:
        server.start()
        run_rounds(args, server.data_url, server.admin_url)


if __name__ == "__main__":
    main()
