#!/usr/bin/env python3
"""Kill a real lmstfy-py server with SIGKILL under load, again and again, then account for every job.

Producers publish and consumers consume+ACK over HTTP (releasing a fifth of what they get and
touching another fifth before its ACK) against one `lmstfy-py serve`
process (embedded Redis in a temporary data dir, loopback ports). Every `--interval`
seconds the server is killed with SIGKILL at whatever it was doing and started again on the
same data dir. Afterwards the consumers drain the queue, and every job whose publish was
answered 201 must be accounted for: ACKed by a consumer, in the dead letter, or expired by
its ttl. Prints published / acked / dead / expired / missing / duplicates and exits 1 when
any job is missing. `run()` returns those figures (tests/e2e/test_crash.py asserts on them).

    .venv/bin/python -m benchmarks.crash_test --kills 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from redis.asyncio import Redis

from benchmarks.harness.lmstfy_servers import Server, create_token
from lmstfy_py.store import keys

NS, QUEUE = "crash", "jobs"
TRIES = 3
TTR = 1  # short, so jobs reserved by a consumer that lost its server come back quickly
SHORT_TTL = 4  # some jobs get it, so that expiry is exercised too
READY_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class Settings:
    kills: int = 5  # how many times to SIGKILL the server
    interval: float = 1.5  # mean seconds between kills
    producers: int = 2
    consumers: int = 4
    drain_timeout: float = 60.0


@dataclass
class Ledger:
    """What the clients saw; the server's state is checked against it at the end."""

    published: dict[str, float] = field(default_factory=dict)  # job id -> time its ttl ends (inf: none)
    uncertain_publishes: int = 0  # no answer: the job may or may not exist
    deliveries: Counter[str] = field(default_factory=Counter)
    acked: set[str] = field(default_factory=set)
    # ACKs whose outcome is unknown, so they may or may not have been done: the answer was lost
    # with the killed server, or was a 5xx (Redis went away after running the ACK, before replying).
    ack_unanswered: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Report:
    """Every job published (answered 201) is in exactly one of acked, ack_answer_lost, dead, expired, missing."""

    kills: int
    starts: int
    published: int
    acked: int
    ack_answer_lost: int  # ACKed, though no 204 came back (lost, or a 5xx): Redis no longer holds the job
    dead: int
    expired: int
    expired_still_stored: int  # expired by their ttl, yet Redis still holds their data
    missing: list[str]
    duplicates: int  # jobs delivered more than once (at-least-once allows it)
    uncertain_publishes: int
    errors: dict[str, int]
    exit_code: int | None = None  # of the final graceful stop, once stopped

    @property
    def accounted(self) -> int:
        return self.acked + self.ack_answer_lost + self.dead + self.expired


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
            if await _released_or_touched(client, token, job_id):
                continue  # it comes back (or, with no try left, goes to the dead letter)
            try:
                acked = await client.delete(f"/api/{NS}/{QUEUE}/job/{job_id}", params={"token": token})
            except httpx.TransportError:
                ledger.ack_unanswered.add(job_id)
                raise
            if acked.status_code == 204:
                ledger.acked.add(job_id)
            else:
                ledger.errors[f"ack {acked.status_code}"] += 1
                if acked.status_code >= 500:
                    ledger.ack_unanswered.add(job_id)
        except httpx.TransportError:
            ledger.errors["transport"] += 1
            await asyncio.sleep(0.05)


async def _released_or_touched(client: httpx.AsyncClient, token: str, job_id: str) -> bool:
    """A worker's other verbs in the mix: a fifth of the deliveries are released (now or after up to
    200 ms), a fifth touched before their ACK. True when the job was released: it is not ACKed now."""
    path, dice = f"/api/{NS}/{QUEUE}/job/{job_id}", random.random()
    if dice < 0.2:
        answer = await client.put(f"{path}/release", params={"token": token, "delay_ms": random.randrange(200)})
        return answer.status_code == 200
    if dice < 0.4:
        await client.put(f"{path}/touch", params={"token": token, "ttr_ms": 2000})
    return False


async def dead_ids(redis: Redis) -> set[str]:
    return {keys.unpack_element(e)[1] for e in await redis.lrange(keys.dead(NS, QUEUE), 0, -1)}


async def unaccounted(ledger: Ledger, redis: Redis) -> set[str]:
    dead, now = await dead_ids(redis), time.time()
    return {job_id for job_id, ends in ledger.published.items() if job_id not in ledger.acked | dead and ends > now}


async def acked_unanswered(ledger: Ledger, redis: Redis, candidates: set[str]) -> set[str]:
    """Jobs whose ACK got no answer (or a 5xx) and that Redis no longer holds: the ACK was done.

    Had the ACK not been done, the job would still be stored (reserved, then delivered again).
    """
    unanswered = candidates & ledger.ack_unanswered
    return {job_id for job_id in unanswered if not await redis.exists(keys.job(NS, QUEUE, job_id))}


async def still_missing(ledger: Ledger, redis: Redis) -> set[str]:
    candidates = await unaccounted(ledger, redis)
    return candidates - await acked_unanswered(ledger, redis, candidates)


async def kill_under_load(server: Server, token: str, ledger: Ledger, settings: Settings) -> None:
    """Producers and consumers run while the server is killed and restarted; then drains the queue."""
    stop_producers, stop_consumers = asyncio.Event(), asyncio.Event()
    limits = httpx.Limits(max_connections=settings.producers + settings.consumers)
    async with httpx.AsyncClient(base_url=server.data_url, timeout=5, limits=limits) as client:
        work = [(produce, stop_producers)] * settings.producers + [(consume, stop_consumers)] * settings.consumers
        tasks = [asyncio.create_task(step(client, token, ledger, stop)) for step, stop in work]
        try:
            for _ in range(settings.kills):
                await asyncio.sleep(random.uniform(0.5, 1.5) * settings.interval)
                # In a thread: the clients go on (and fail) while the server is down and starting.
                await asyncio.to_thread(restart_after_kill, server)
            await asyncio.sleep(settings.interval)
            stop_producers.set()
            await drain(server, ledger, settings.drain_timeout)
        finally:
            stop_producers.set()
            stop_consumers.set()
            await asyncio.gather(*tasks)


def restart_after_kill(server: Server) -> None:
    server.kill()  # returns once its Redis is gone: the data dir is free again
    server.launch()
    server.wait_ready(READY_TIMEOUT)


async def drain(server: Server, ledger: Ledger, timeout: float) -> None:
    """Until every job is accounted for, or `timeout`: consumers take what comes back after its ttr."""
    redis = Redis(unix_socket_path=str(server.redis_socket))
    try:
        deadline = time.monotonic() + timeout
        while await still_missing(ledger, redis) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    finally:
        await redis.aclose()


async def account(server: Server, ledger: Ledger, settings: Settings) -> Report:
    redis = Redis(unix_socket_path=str(server.redis_socket))
    try:
        missing = await still_missing(ledger, redis)
        answer_lost = await acked_unanswered(ledger, redis, await unaccounted(ledger, redis))
        dead = await dead_ids(redis) & ledger.published.keys()
        now, acked = time.time(), ledger.acked & ledger.published.keys()
        expired = {j for j, ends in ledger.published.items() if ends <= now and j not in acked | dead}
        still_stored = [j for j in expired if await redis.exists(keys.job(NS, QUEUE, j))]
    finally:
        await redis.aclose()
    return Report(
        kills=settings.kills,
        starts=server.starts,
        published=len(ledger.published),
        acked=len(acked),
        ack_answer_lost=len(answer_lost),
        dead=len(dead),
        expired=len(expired),
        expired_still_stored=len(still_stored),
        missing=sorted(missing),
        duplicates=sum(1 for n in ledger.deliveries.values() if n > 1),
        uncertain_publishes=ledger.uncertain_publishes,
        errors=dict(ledger.errors),
    )


async def run(workdir: Path, settings: Settings, http_server: str | None = None) -> Report:
    """One crash test on a server of its own (data dir and logs in `workdir`; `--http-server` when
    given); its figures."""
    with Server(workdir, http_server=http_server) as server:
        server.launch()
        server.wait_ready(READY_TIMEOUT)
        token = create_token(server, NS, "crash test")
        ledger = Ledger()
        await kill_under_load(server, token, ledger, settings)
        report = await account(server, ledger, settings)
        exit_code = server.stop(STOP_TIMEOUT)
    return replace(report, exit_code=exit_code)


def print_report(report: Report) -> None:
    print(f"server starts:        {report.starts} ({report.kills} SIGKILLs)")
    print(f"published:            {report.published}")
    print(f"acked:                {report.acked} (+{report.ack_answer_lost} whose 204 never came: lost, or a 5xx)")
    print(f"dead:                 {report.dead}")
    print(f"expired:              {report.expired} ({report.expired_still_stored} of them still stored)")
    print(f"missing:              {len(report.missing)}")
    print(f"duplicates:           {report.duplicates} jobs delivered more than once")
    print(f"uncertain publishes:  {report.uncertain_publishes} (no answer; not counted as published)")
    print(f"client errors:        {report.errors}")
    print(f"final stop exit code: {report.exit_code}")
    if report.missing:
        print("MISSING:", " ".join(report.missing[:20]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=Settings.kills, help="how many times to SIGKILL the server")
    parser.add_argument("--interval", type=float, default=Settings.interval, help="mean seconds between kills")
    parser.add_argument("--producers", type=int, default=Settings.producers)
    parser.add_argument("--consumers", type=int, default=Settings.consumers)
    parser.add_argument("--drain-timeout", type=float, default=Settings.drain_timeout)
    args = parser.parse_args(argv)
    settings = Settings(args.kills, args.interval, args.producers, args.consumers, args.drain_timeout)
    report = asyncio.run(run(Path(tempfile.mkdtemp(prefix="lmstfy-crash-")), settings))
    print_report(report)
    return 1 if report.missing or report.expired_still_stored or report.exit_code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
