#!/usr/bin/env python3
"""Many waiting consumers on one server process: do they all work, and how many Redis connections?

Starts one `lmstfy-py serve` (embedded Redis, loopback ports), opens --waiters HTTP
connections that each long-poll one queue, counts the Redis connections the server then
holds (CLIENT LIST on its embedded Redis), publishes exactly one job per waiter in bulk, and
checks every waiter got a different job. Prints the figures; exits 1 on any error.

    .venv/bin/python benchmarks/bench_longpolls.py --waiters 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crash_test import ServerProcess, create_token, free_port
from loadclient import Answer, Connection

NS, QUEUE = "waiters", "q"


def allow_open_files(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


async def long_poll(host: tuple[str, int], token: str, timeout: int) -> Answer:
    conn = Connection(*host)
    try:
        return await conn.request("GET", f"/api/{NS}/{QUEUE}", {"token": token, "timeout": timeout, "ttr": 60})
    finally:
        await conn.close()


async def publish(host: tuple[str, int], token: str, count: int) -> None:
    conn = Connection(*host)
    while count > 0:
        batch = min(64, count)
        answer = await conn.request(
            "PUT", f"/api/{NS}/{QUEUE}/bulk", {"token": token}, json.dumps([1] * batch).encode()
        )
        assert answer.status == 201, answer
        count -= batch
    await conn.close()


async def redis_connections(redis: Redis) -> tuple[int, int]:
    """(all clients but ours, those blocked in BRPOP)."""
    clients = [c for c in await redis.client_list() if c.get("name") != "bench"]
    return len(clients), sum(1 for c in clients if "b" in c["flags"])


async def run(args: argparse.Namespace) -> int:
    allow_open_files(args.waiters * 2 + 1000)
    work = Path(tempfile.mkdtemp(prefix="lmstfy-waiters-"))
    # --workers 1: one server process: its connections are the figure
    server = ServerProcess(work / "data", free_port(), free_port(), work / "server.log", "--workers", "1")
    await server.start()
    try:
        token = await create_token(server.admin_port, NS)
        host = ("127.0.0.1", server.port)
        polls = [asyncio.create_task(long_poll(host, token, args.timeout)) for _ in range(args.waiters)]
        await asyncio.sleep(args.settle)
        redis = Redis(unix_socket_path=str(server.data_dir / "redis.sock"), client_name="bench")
        held, blocked = await redis_connections(redis)
        started = time.monotonic()
        await publish(host, token, args.waiters)
        answers = await asyncio.wait_for(asyncio.gather(*polls, return_exceptions=True), args.timeout + 10)
        seconds = time.monotonic() - started
        await redis.aclose()
    finally:
        exit_code = server.stop()
    got = [a for a in answers if isinstance(a, Answer) and a.status == 200]
    distinct = len({a.json()["job_id"] for a in got})
    errors = [a for a in answers if not (isinstance(a, Answer) and a.status == 200)]
    print(f"waiters:              {args.waiters}")
    print(f"redis connections:    {held} held by the server while they waited ({blocked} blocked in BRPOP)")
    print(f"jobs delivered:       {len(got)} ({distinct} distinct) in {seconds:.2f} s after publishing began")
    print(f"errors:               {len(errors)} {[repr(e)[:80] for e in errors[:3]]}")
    print(f"final stop exit code: {exit_code}")
    return 0 if distinct == args.waiters and not errors and exit_code == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=2000)
    parser.add_argument("--timeout", type=int, default=30, help="each long-poll's timeout, seconds")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds for the waiters to connect and wait")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
