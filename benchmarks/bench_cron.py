#!/usr/bin/env python3
"""Recurring jobs under load: how many ticks fire, how late, and what a fire costs, per source tree.

Each round starts `lmstfy-py serve` (embedded Redis, fsync always, --workers processes) from one
source tree, registers --schedules schedules (`every=--every` seconds, all publishing to one
queue, each its name as its job's data), lets them run --seconds, then removes them and consumes
what they published. Per round: jobs fired for the ticks that fell in the window against those
ticks (a tick's job may come after the window), lateness (a job's id time minus its tick; ms),
and the server's and its Redis's CPU per fire (/proc). Trees alternate round by round (who goes
first alternating), so both see the same noise of a shared machine; medians per tree come last.

    .venv/bin/python -m benchmarks.bench_cron --trees ../base . --rounds 3
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.bench import cpu_seconds
from benchmarks.harness.lmstfy_servers import Server, create_token
from lmstfy_py import ids

NS, QUEUE = "bench-cron", "beats"


@dataclass(frozen=True)
class Round:
    tree: str
    fired: int
    expected: int
    late_ms: list[int]
    server_cpu_s: float
    redis_cpu_s: float

    def percentile(self, q: float) -> float:
        ordered = sorted(self.late_ms) or [0]
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def cpu_us_per_fire(self) -> float:
        return 1e6 * (self.server_cpu_s + self.redis_cpu_s) / max(1, self.fired)

    def line(self) -> str:
        per_fire = 1e6 / max(1, self.fired)
        return (
            f"{self.tree}: fired {self.fired} of {self.expected} ticks; late p50 {self.percentile(0.5):.0f} ms, "
            f"p99 {self.percentile(0.99):.0f} ms, max {max(self.late_ms, default=0)} ms; CPU per fire "
            f"server {self.server_cpu_s * per_fire:.0f} us, redis {self.redis_cpu_s * per_fire:.0f} us"
        )


@contextlib.contextmanager
def served_from(tree: Path, workdir: Path, workers: int) -> Iterator[Server]:
    """A server running `tree`'s code: `python -m` puts the working directory first on sys.path."""
    here = Path.cwd()
    os.chdir(tree)
    try:
        server = Server(workdir, args=["--workers", str(workers)])
        server.start()
    finally:
        os.chdir(here)
    try:
        yield server
    finally:
        server.stop()
        server.cleanup()


def register(client: httpx.Client, token: str, name: str, every: int) -> int:
    answer = client.put(
        f"/api/{NS}/{QUEUE}/cron/{name}", params={"token": token, "every": every, "catchup": "none"}, content=name
    )
    assert answer.status_code == 201, answer.text
    next_ms: int = answer.json()["next_ms"]
    return next_ms


def drained(client: httpx.Client, token: str) -> list[tuple[str, int]]:
    """(schedule name, publish ms) of every job the schedules made."""
    jobs: list[tuple[str, int]] = []
    while True:
        answer = client.get(f"/api/{NS}/{QUEUE}", params={"token": token, "count": 100, "timeout": 0})
        if answer.status_code == 404:
            return jobs
        assert answer.status_code == 200, answer.text
        batch = answer.json()
        ids_ = [job["job_id"] for job in batch]
        jobs += [(_body(job), ids.timestamp_ms(job["job_id"])) for job in batch]
        client.delete(f"/api/{NS}/{QUEUE}/jobs", params={"token": token, "job_id": ",".join(ids_)})


def _body(job: dict[str, str]) -> str:
    return base64.b64decode(job["data"]).decode()


def one_round(tree: Path, args: argparse.Namespace) -> Round:
    with tempfile.TemporaryDirectory() as tmp, served_from(tree, Path(tmp), args.workers) as server:
        token = create_token(server, NS)
        with httpx.Client(base_url=server.data_url, timeout=30) as client:
            first_tick = {f"s{i}": register(client, token, f"s{i}", args.every) for i in range(args.schedules)}
            pids = [*server.pids(), server.redis_pid]
            before = [cpu_seconds(pid) for pid in pids]
            started_ms = time.time() * 1000
            time.sleep(args.seconds)
            ended_ms = time.time() * 1000
            after = [cpu_seconds(pid) for pid in pids]
            for name in first_tick:
                client.delete(f"/api/{NS}/{QUEUE}/cron/{name}", params={"token": token})
            jobs = drained(client, token)
    step = args.every * 1000
    expected = sum(
        len(range(tick, int(ended_ms), step)) - len(range(tick, int(started_ms), step)) for tick in first_tick.values()
    )
    late = [(at, (at - first_tick[name]) % step) for name, at in jobs]
    in_window = [late_ms for at, late_ms in late if started_ms <= at - late_ms < ended_ms]
    redis_s = after[-1] - before[-1]
    server_s = sum(after[:-1]) - sum(before[:-1])
    return Round(str(tree), len(in_window), expected, in_window, server_s, redis_s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")], help="source trees to compare")
    parser.add_argument("--schedules", type=int, default=500)
    parser.add_argument("--every", type=int, default=1, help="seconds between a schedule's ticks")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window of a round")
    parser.add_argument("--rounds", type=int, default=3, help="per tree")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    trees = [tree.resolve() for tree in args.trees]
    results: dict[str, list[Round]] = {str(tree): [] for tree in trees}
    for number in range(args.rounds):
        order = trees if number % 2 == 0 else trees[::-1]
        for tree in order:
            measured = one_round(tree, args)
            results[str(tree)].append(measured)
            print(f"round {number + 1} {measured.line()}", flush=True)
    for tree, rounds in results.items():
        print(
            f"== {tree}: median fired {statistics.median(r.fired / max(1, r.expected) for r in rounds):.3f} "
            "of the ticks, "
            f"late p50 {statistics.median(r.percentile(0.5) for r in rounds):.0f} ms, "
            f"p99 {statistics.median(r.percentile(0.99) for r in rounds):.0f} ms, "
            f"CPU per fire {statistics.median(r.cpu_us_per_fire for r in rounds):.0f} us (server + redis)"
        )


if __name__ == "__main__":
    main()
