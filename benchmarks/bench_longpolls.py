#!/usr/bin/env python3
"""Many waiting consumers on one server process: do they all work, and how many Redis connections?

Starts one `lmstfy-py serve` (embedded Redis, loopback ports), opens --waiters HTTP
connections that each long-poll one queue, waits until the server has accepted them all and
gone idle (every request has reached its wait), counts the Redis connections it then holds
(CLIENT LIST on its embedded Redis), publishes exactly one job per waiter in bulk, and checks
every waiter got a different job. Prints the figures; exits 1 on any error. `run()` returns
them (tests/e2e/test_long_polls.py asserts on them).

    .venv/bin/python -m benchmarks.bench_longpolls --waiters 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from redis.asyncio import Redis

from benchmarks.harness.lmstfy_servers import Server, accepted_connections, create_token, wait_until
from benchmarks.loadclient import Answer, Connection

NS, QUEUE = "waiters", "q"
CONNECT_TIMEOUT = 30.0  # for the server to accept every waiter's connection, and to go idle after
# Idle: less CPU than this over a window. Taking 2,000 requests keeps it near 100 % for seconds.
IDLE_CPU_SHARE, IDLE_WINDOW_S = 0.1, 0.25


@dataclass(frozen=True)
class Report:
    waiters: int
    accepted: int  # connections the server held open when the Redis connections were counted
    redis_connections: int  # held by the server while the waiters waited
    blocked: int  # of them, blocked in BRPOP
    delivered: int  # waiters answered 200 with a job
    distinct: int  # different jobs among those
    seconds: float  # from the first publish to the last answer
    errors: list[str]
    exit_code: int | None = None  # of the graceful stop, once stopped


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


def accepted(server: Server) -> int:
    return sum(accepted_connections(pid, server.port) for pid in server.pids())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle(server: Server) -> bool:
    """Whether the server used less than IDLE_CPU_SHARE of a core over the next IDLE_WINDOW_S."""
    before = sum(map(cpu_seconds, server.pids()))
    time.sleep(IDLE_WINDOW_S)
    return sum(map(cpu_seconds, server.pids())) - before < IDLE_CPU_SHARE * IDLE_WINDOW_S


def settled(server: Server, waiters: int) -> bool:
    """Every waiter's connection accepted, then every request taken in: the server has gone idle."""
    return wait_until(lambda: accepted(server) >= waiters, CONNECT_TIMEOUT) and wait_until(
        lambda: idle(server), CONNECT_TIMEOUT
    )


async def measure(server: Server, token: str, waiters: int, timeout: int) -> Report:
    """`waiters` long-polls on the running `server`, counted, then each given a job."""
    allow_open_files(waiters * 2 + 1000)
    host = ("127.0.0.1", server.port)
    polls = [asyncio.create_task(long_poll(host, token, timeout)) for _ in range(waiters)]
    redis = Redis(unix_socket_path=str(server.redis_socket), client_name="bench")
    try:
        if not await asyncio.to_thread(settled, server, waiters):
            raise RuntimeError(f"the server did not take in {waiters} waiters within {CONNECT_TIMEOUT:g} s")
        held_open = accepted(server)
        held, blocked = await redis_connections(redis)
        started = time.monotonic()
        await publish(host, token, waiters)
        answers = await asyncio.wait_for(asyncio.gather(*polls, return_exceptions=True), timeout + 10)
        seconds = time.monotonic() - started
    finally:
        await redis.aclose()
        for poll in polls:
            poll.cancel()  # none is left unless we leave by an exception
        await asyncio.gather(*polls, return_exceptions=True)
    got = [a for a in answers if isinstance(a, Answer) and a.status == 200]
    errors = [repr(a)[:200] for a in answers if not (isinstance(a, Answer) and a.status == 200)]
    distinct = len({a.json()["job_id"] for a in got})
    return Report(waiters, held_open, held, blocked, len(got), distinct, seconds, errors)


async def run(workdir: Path, waiters: int, timeout: int = 30, http_server: str | None = None) -> Report:
    """The measure on a server of its own (one worker: its connections are the figure; `--http-server`
    when given), stopped after."""
    with Server(workdir, args=["--workers", "1"], http_server=http_server) as server:
        server.start()
        token = create_token(server, NS, "bench_longpolls")
        report = await measure(server, token, waiters, timeout)
        exit_code = server.stop()
    return replace(report, exit_code=exit_code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=2000)
    parser.add_argument("--timeout", type=int, default=30, help="each long-poll's timeout, seconds")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="lmstfy-waiters-"))
    report = asyncio.run(run(workdir, args.waiters, args.timeout))
    print(f"waiters:              {report.waiters} ({report.accepted} connections held by the server)")
    print(
        f"redis connections:    {report.redis_connections} held by the server while they waited "
        f"({report.blocked} blocked in BRPOP)"
    )
    print(
        f"jobs delivered:       {report.delivered} ({report.distinct} distinct) in {report.seconds:.2f} s "
        "after publishing began"
    )
    print(f"errors:               {len(report.errors)} {report.errors[:3]}")
    print(f"final stop exit code: {report.exit_code}")
    ok = report.distinct == args.waiters and not report.errors and report.exit_code == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
