#!/usr/bin/env python3
"""Kill a real lmstfy-py server with SIGKILL under load, again and again, then account for every job.

Producers publish and consumers consume+ACK over HTTP against one `lmstfy-py serve`
process (embedded Redis in a temporary data dir, loopback ports). Every `--interval`
seconds the server is killed with SIGKILL at whatever it was doing and started again on the
same data dir. Afterwards the consumers drain the queue, and every job whose publish was
answered 201 must be accounted for: ACKed by a consumer, in the dead letter, or expired by
its ttl. Prints published / acked / dead / expired / missing / duplicates and exits 1 when
any job is missing.

    .venv/bin/python benchmarks/crash_test.py --kills 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmstfy_py.store import keys  # noqa: E402

NS, QUEUE = "crash", "jobs"
TRIES = 3
TTR = 1  # short, so jobs reserved by a consumer that lost its server come back quickly
SHORT_TTL = 4  # some jobs get it, so that expiry is exercised too
READY_TIMEOUT = 20.0


@dataclass
class Ledger:
    """What the clients saw; the server's state is checked against it at the end."""

    published: dict[str, float] = field(default_factory=dict)  # job id -> time its ttl ends (inf: none)
    uncertain_publishes: int = 0  # no answer: the job may or may not exist
    deliveries: Counter[str] = field(default_factory=Counter)
    acked: set[str] = field(default_factory=set)
    # ACKs whose answer was lost with the killed server: they may or may not have been done.
    ack_unanswered: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, data_dir: Path, port: int, admin_port: int, log: Path, *extra: str) -> None:
        self.data_dir, self.port, self.admin_port, self.log = data_dir, port, admin_port, log
        self.extra = extra  # more `serve` flags
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        ports = ["--host", "127.0.0.1", "--port", str(self.port), "--admin-port", str(self.admin_port)]
        return [sys.executable, "-m", "lmstfy_py.cli", "serve", *ports, "--data-dir", str(self.data_dir), *self.extra]

    async def start(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT)
            if await self._ready(deadline):
                self.starts += 1
                return
            # Most likely the killed server's Redis still holds the data dir lock: try again.
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {self.log}")
            await asyncio.sleep(0.1)

    async def _ready(self, deadline: float) -> bool:
        assert self.proc is not None
        async with httpx.AsyncClient(timeout=1) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    if (await client.get(f"http://127.0.0.1:{self.admin_port}/version")).status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        return False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


async def produce(client: httpx.AsyncClient, token: str, ledger: Ledger, stop: asyncio.Event) -> None:
    while not stop.is_set():
        delay = random.choice((0, 0, 0, 1))
        # Few jobs get a short ttl: only those can count as expired; every other job must be ACKed or dead.
        ttl = SHORT_TTL if random.random() < 0.03 else 0
        try:
            answer = await client.put(
                f"/api/{NS}/{QUEUE}",
                params={"token": token, "delay": delay, "ttl": ttl, "tries": TRIES},
                content=os.urandom(16),
            )
        except httpx.TransportError:
            ledger.uncertain_publishes += 1
            await asyncio.sleep(0.05)
            continue
        if answer.status_code == 201:
            ledger.published[answer.json()["job_id"]] = time.time() + ttl if ttl else float("inf")
        else:
            ledger.errors[f"publish {answer.status_code}"] += 1
            await asyncio.sleep(0.05)


async def consume(client: httpx.AsyncClient, token: str, ledger: Ledger, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            answer = await client.get(f"/api/{NS}/{QUEUE}", params={"token": token, "ttr": TTR, "timeout": 1})
            if answer.status_code == 404:
                continue
            if answer.status_code != 200:
                ledger.errors[f"consume {answer.status_code}"] += 1
                await asyncio.sleep(0.05)
                continue
            job_id = answer.json()["job_id"]
            ledger.deliveries[job_id] += 1
            try:
                acked = await client.delete(f"/api/{NS}/{QUEUE}/job/{job_id}", params={"token": token})
            except httpx.TransportError:
                ledger.ack_unanswered.add(job_id)
                raise
            if acked.status_code == 204:
                ledger.acked.add(job_id)
        except httpx.TransportError:
            ledger.errors["transport"] += 1
            await asyncio.sleep(0.05)


async def create_token(admin_port: int, ns: str = NS) -> str:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"http://127.0.0.1:{admin_port}/token/{ns}", params={"description": "bench"})
        answer.raise_for_status()
        return str(answer.json()["token"])


async def dead_ids(redis: Redis) -> set[str]:
    return {keys.unpack_element(e)[1] for e in await redis.lrange(keys.dead(NS, QUEUE), 0, -1)}


async def unaccounted(ledger: Ledger, redis: Redis) -> set[str]:
    dead, now = await dead_ids(redis), time.time()
    return {job_id for job_id, ends in ledger.published.items() if job_id not in ledger.acked | dead and ends > now}


async def acked_unanswered(ledger: Ledger, redis: Redis, candidates: set[str]) -> set[str]:
    """Jobs whose ACK got no answer and that Redis no longer holds: the ACK was done, its answer lost.

    Had the ACK not been done, the job would still be stored (reserved, then delivered again).
    """
    unanswered = candidates & ledger.ack_unanswered
    return {job_id for job_id in unanswered if not await redis.exists(keys.job(NS, QUEUE, job_id))}


async def still_missing(ledger: Ledger, redis: Redis) -> set[str]:
    candidates = await unaccounted(ledger, redis)
    return candidates - await acked_unanswered(ledger, redis, candidates)


async def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="lmstfy-crash-"))
    server = ServerProcess(work / "data", free_port(), free_port(), work / "server.log")
    await server.start()
    token = await create_token(server.admin_port)
    ledger, stop_producers, stop_consumers = Ledger(), asyncio.Event(), asyncio.Event()
    limits = httpx.Limits(max_connections=args.producers + args.consumers)
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=5, limits=limits)
    tasks = [asyncio.create_task(produce(client, token, ledger, stop_producers)) for _ in range(args.producers)]
    tasks += [asyncio.create_task(consume(client, token, ledger, stop_consumers)) for _ in range(args.consumers)]

    for _ in range(args.kills):
        await asyncio.sleep(random.uniform(0.5, 1.5) * args.interval)
        server.kill()
        await server.start()
    await asyncio.sleep(args.interval)
    stop_producers.set()

    redis = Redis(unix_socket_path=str(server.data_dir / "redis.sock"))
    deadline = time.monotonic() + args.drain_timeout
    while await still_missing(ledger, redis) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    stop_consumers.set()
    await asyncio.gather(*tasks)
    await client.aclose()

    missing = await still_missing(ledger, redis)
    answer_lost = await acked_unanswered(ledger, redis, await unaccounted(ledger, redis))
    dead = await dead_ids(redis) & ledger.published.keys()
    expired = {j for j, ends in ledger.published.items() if ends <= time.time() and j not in ledger.acked | dead}
    still_stored = [j for j in expired if await redis.exists(keys.job(NS, QUEUE, j))]
    await redis.aclose()
    exit_code = server.stop()

    print(f"server starts:        {server.starts} ({args.kills} SIGKILLs)")
    print(f"published:            {len(ledger.published)}")
    acked = len(ledger.acked & ledger.published.keys())
    print(f"acked:                {acked} (+{len(answer_lost)} whose 204 was lost with the server)")
    print(f"dead:                 {len(dead)}")
    print(f"expired:              {len(expired)} ({len(still_stored)} of them still stored)")
    print(f"missing:              {len(missing)}")
    print(f"duplicates:           {sum(1 for n in ledger.deliveries.values() if n > 1)} jobs delivered more than once")
    print(f"uncertain publishes:  {ledger.uncertain_publishes} (no answer; not counted as published)")
    print(f"client errors:        {dict(ledger.errors)}")
    print(f"final stop exit code: {exit_code}")
    if missing:
        print("MISSING:", " ".join(sorted(missing)[:20]))
    return 1 if missing or still_stored or exit_code != 0 else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5, help="how many times to SIGKILL the server")
    parser.add_argument("--interval", type=float, default=1.5, help="mean seconds between kills")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--drain-timeout", type=float, default=60.0)
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
