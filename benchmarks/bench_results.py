#!/usr/bin/env python3
"""Result waiters (SPEC 13, issue 28): how soon after a job ends is its waiter answered?

Starts one `lmstfy-py serve` (embedded Redis, one worker process: the issue's "one server
process"), publishes --jobs jobs (keep 0: a waiter present at the end gets it all the same),
opens one `GET .../job/{id}/result?wait=` per job, each on its own connection, waits until the
server has taken every waiter in and gone idle, then consumes the jobs and ends them in batches
of --batch: a batch ACK (`--end ack`) or one `complete` each (`--end complete`, the result is the
job's id). A waiter's lateness is the time from the moment its job's ending request was sent to
the moment the waiter's answer was read; it includes the ending request's own round trip, so it
is an upper bound. Prints p50 / p99 / max of it and how many waiters were answered 200 with the
right end; exits 1 on any error.

    .venv/bin/python -m benchmarks.bench_results --jobs 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_longpolls import accepted, allow_open_files, idle
from benchmarks.harness.lmstfy_servers import Server, create_token, wait_until
from benchmarks.loadclient import Answer, Connection

NS = "results"
SETTLE_TIMEOUT = 60.0  # for the server to accept every waiter and go idle


@dataclass(frozen=True)
class Round:
    waiters: int
    answered: int  # 200 with the state and result the end gave
    lateness_ms: list[float]  # per answered waiter, sorted
    errors: list[str]

    def percentile(self, share: float) -> float:
        if not self.lateness_ms:
            return float("nan")
        return self.lateness_ms[min(len(self.lateness_ms) - 1, int(share * len(self.lateness_ms)))]


async def publish(conn: Connection, token: str, queue: str, jobs: int) -> list[str]:
    ids: list[str] = []
    while len(ids) < jobs:
        answer = await conn.request("PUT", f"/api/{NS}/{queue}", {"token": token}, b"x" * 100)
        if answer.status != 201:
            raise RuntimeError(f"publish: {answer.status} {answer.body[:200]!r}")
        ids.append(answer.json()["job_id"])
    return ids


async def wait_result(host: tuple[str, int], token: str, queue: str, job_id: str, wait_s: int) -> tuple[Answer, float]:
    conn = Connection(*host)
    try:
        answer = await conn.request("GET", f"/api/{NS}/{queue}/job/{job_id}/result", {"token": token, "wait": wait_s})
        return answer, time.monotonic()
    finally:
        await conn.close()


async def consume_all(conn: Connection, token: str, queue: str, jobs: int) -> list[str]:
    reserved: list[str] = []
    while len(reserved) < jobs:
        params = {"token": token, "ttr": 120, "timeout": 1, "count": min(100, jobs - len(reserved))}
        answer = await conn.request("GET", f"/api/{NS}/{queue}", params)
        if answer.status != 200:
            raise RuntimeError(f"consume: {answer.status} {answer.body[:200]!r}")
        got = answer.json()
        reserved.extend(job["job_id"] for job in (got if isinstance(got, list) else [got]))
    return reserved


async def end_batch(conns: list[Connection], token: str, queue: str, ids: list[str], how: str) -> dict[str, float]:
    """Ends the jobs `ids`; answers when each one's ending request was sent."""
    if how == "ack":
        sent = time.monotonic()
        answer = await conns[0].request("DELETE", f"/api/{NS}/{queue}/jobs", {"token": token, "job_id": ",".join(ids)})
        if answer.status != 204:
            raise RuntimeError(f"batch ACK: {answer.status} {answer.body[:200]!r}")
        return dict.fromkeys(ids, sent)
    sent_at: dict[str, float] = {}

    async def complete(conn: Connection, chunk: list[str]) -> None:
        for job_id in chunk:
            sent_at[job_id] = time.monotonic()
            answer = await conn.request(
                "PUT", f"/api/{NS}/{queue}/job/{job_id}/complete", {"token": token}, job_id.encode()
            )
            if answer.status != 200:
                raise RuntimeError(f"complete: {answer.status} {answer.body[:200]!r}")

    await asyncio.gather(*(complete(conn, ids[i :: len(conns)]) for i, conn in enumerate(conns)))
    return sent_at


def settled(server: Server, waiters: int) -> bool:
    return wait_until(lambda: accepted(server) >= waiters, SETTLE_TIMEOUT) and wait_until(
        lambda: idle(server), SETTLE_TIMEOUT
    )


def right_end(answer: Answer, job_id: str, how: str) -> bool:
    if answer.status != 200:
        return False
    shown: dict[str, object] = answer.json()
    wanted = base64.b64encode(job_id.encode()).decode() if how == "complete" else None
    return shown.get("state") == "completed" and shown.get("result") == wanted


async def one_round(server: Server, token: str, queue: str, args: argparse.Namespace) -> Round:
    host = ("127.0.0.1", server.port)
    conns = [Connection(*host) for _ in range(8)]
    try:
        ids = await publish(conns[0], token, queue, args.jobs)
        waits = {job_id: asyncio.create_task(wait_result(host, token, queue, job_id, args.wait)) for job_id in ids}
        if not await asyncio.to_thread(settled, server, args.jobs):
            raise RuntimeError(f"the server did not take in {args.jobs} waiters within {SETTLE_TIMEOUT:g} s")
        reserved = await consume_all(conns[0], token, queue, args.jobs)
        ended_at: dict[str, float] = {}
        for start in range(0, len(reserved), args.batch):
            ended_at.update(await end_batch(conns, token, queue, reserved[start : start + args.batch], args.end))
        answers = await asyncio.wait_for(asyncio.gather(*waits.values(), return_exceptions=True), args.wait + 10)
    finally:
        for conn in conns:
            await conn.close()
    lateness, errors, answered = [], [], 0
    for job_id, got in zip(waits, answers, strict=True):
        if isinstance(got, BaseException):
            errors.append(repr(got)[:200])
            continue
        answer, at = got
        if right_end(answer, job_id, args.end):
            answered += 1
            lateness.append((at - ended_at[job_id]) * 1000)
        else:
            errors.append(f"{answer.status} {answer.body[:200]!r}")
    return Round(args.jobs, answered, sorted(lateness), errors)


async def run(workdir: Path, args: argparse.Namespace) -> list[Round]:
    allow_open_files(args.jobs * 2 + 1000)
    rounds = []
    with Server(workdir, args=["--workers", "1"], http_server=args.http_server) as server:
        server.start()
        token = create_token(server, NS, "bench_results")
        for number in range(1, args.rounds + 1):
            rounds.append(await one_round(server, token, f"q{number}", args))
        server.stop()
    return rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs, and waiters (one per job)")
    parser.add_argument("--batch", type=int, default=100, help="jobs ended per step")
    parser.add_argument("--end", choices=["ack", "complete"], default="complete")
    parser.add_argument("--wait", type=int, default=120, help="each waiter's wait, seconds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--http-server", default=None)
    args = parser.parse_args(argv)
    rounds = asyncio.run(run(Path(tempfile.mkdtemp(prefix="lmstfy-results-")), args))
    for number, got in enumerate(rounds, 1):
        print(
            f"round {number}: {got.answered}/{got.waiters} waiters answered with their end; lateness "
            f"p50 {got.percentile(0.5):.1f} ms, p99 {got.percentile(0.99):.1f} ms, "
            f"max {got.lateness_ms[-1] if got.lateness_ms else float('nan'):.1f} ms; errors {len(got.errors)} "
            f"{got.errors[:3]}"
        )
    p99s = [got.percentile(0.99) for got in rounds]
    print(f"median of the rounds' p99: {statistics.median(p99s):.1f} ms ({args.end}, batches of {args.batch})")
    ok = all(got.answered == got.waiters and not got.errors for got in rounds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
