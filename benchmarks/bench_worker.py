#!/usr/bin/env python3
"""One `lmstfy-py worker` process draining prefilled jobs, next to bench.py's consume100_batch.

    .venv/bin/python -m benchmarks.bench_worker                 # starts its own server (2 workers)
    .venv/bin/python -m benchmarks.bench_worker --url http://127.0.0.1:7777 --admin http://127.0.0.1:7778

Each round, on the same server, each in a fresh namespace purged after it:
1. consume100_batch: --jobs jobs prefilled (bulk), then bench.py's batch ACKers (--clients
   keep-alive connections, each `GET ?count=100` then one `DELETE .../jobs?job_id=...`) drain them;
2. the worker: --jobs jobs prefilled, then one `lmstfy-py worker` process (--concurrency, a no-op
   handler, async or sync; its ACKs with its consumes or, `--ack-with-consume off`, by batch
   ACK only, "-batchack" in its name) drains them. Its clock starts at the first job it takes (its start-up
   is not counted) and stops when the queue has nothing ready, delayed or reserved: every job
   handled and ACKed, end to end (polled every 20 ms). With --raw-carriers N, also N raw
   connections draining them as the worker's consume loops do (count=100, the ACKs of the jobs
   before carried by each consume) with no client library and no handler: the worker's pattern
   at no cost of its own, "raw-carriers" in the figures;
3. consume100_batch again.
It prints jobs/s of each; the CPU of the server, its Redis and the consuming side (bench.py's
clients, or the worker process), and that CPU per job; the consumes and batch ACKs a worker sent
(as the server's metrics counted them, with their mean latency); each worker run's ratio to the
mean of its round's two consume100_batch runs; then the medians over --rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import uvloop

from benchmarks import bench
from benchmarks.bench import BULK, Meter, Processes, Target
from benchmarks.harness.lmstfy_servers import Server
from benchmarks.loadclient import Connection

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "q"
POLL_S = 0.02
DRAIN_TIMEOUT_S = 600.0
RAW = "raw"  # Variant.handler of the raw carriers (--raw-carriers), not a worker
HANDLERS = {
    "async": "benchmarks.bench_worker:noop_async",
    "sync": "benchmarks.bench_worker:noop_sync",
    "async-5ms": "benchmarks.bench_worker:wait_5ms",
}


async def noop_async(job: object) -> None:
    """The benchmark's handler: returns at once, so the figure is the worker's own cost."""


def noop_sync(job: object) -> None:
    """The same, run on the worker's handler threads."""


async def wait_5ms(job: object) -> None:
    """A handler that waits as a quick remote call would: how well the worker hides its consumes."""
    await asyncio.sleep(0.005)


@dataclass
class Figures:
    """CPU in % of one core over the window: the server's processes, its Redis, the consuming side
    (`consumer`: bench.py's batch clients in this process, or the worker process), and whatever
    else the machine ran (above ~10% the figures of that line are noisy)."""

    jobs: int
    seconds: float
    server_cpu_pct: float
    redis_cpu_pct: float
    consumer: str
    consumer_cpu_pct: float
    other_cpu_pct: float

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_job(self) -> float:
        """What the whole pipeline (server, Redis, consumer) spent on a job."""
        cpu_pct = self.server_cpu_pct + self.redis_cpu_pct + self.consumer_cpu_pct
        return cpu_pct / 100 * self.seconds / self.jobs * 1e6 if self.jobs else 0.0


# -- prefill and the consume100_batch scenario ----------------------------------------------------


async def prefill(t: Target, jobs: int) -> None:
    """Exactly `jobs` jobs into QUEUE, bulk, over t.clients connections."""
    sizes = iter([BULK] * (jobs // BULK) + ([jobs % BULK] if jobs % BULK else []))

    async def fill() -> None:
        conn = t.connect()
        for size in sizes:
            body = json.dumps([f"job-{i}" for i in range(size)]).encode()
            bench.expect(await conn.request("PUT", t.path(QUEUE, "bulk"), t.params(), body), 201)
        await conn.close()

    await asyncio.gather(*(fill() for _ in range(t.clients)))


async def consume100_batch(t: Target, procs: Processes, jobs: int) -> Figures:
    await prefill(t, jobs)
    result = await bench.measure(
        "consume100_batch", Meter(procs, None), [bench.batch_acker(t, QUEUE) for _ in range(t.clients)], DRAIN_TIMEOUT_S
    )
    server, redis = result.server_cpu_pct or 0.0, result.redis_cpu_pct or 0.0
    return Figures(result.jobs, result.seconds, server, redis, "bench", result.client_cpu_pct, result.other_cpu_pct)


async def carrying_consume(t: Target, rec: bench.Recorder, conn: Connection, held: list[str]) -> list[str] | None:
    """One `GET ?count=100&ack=...` on `conn`, carrying the ACKs of the `held` ids of QUEUE (lmstfy-py's
    consume that ACKs, as a worker's consume loop sends it): the ids it brought, None for "no job"."""
    carried = {"ack": ",".join(f"{QUEUE}:{job_id}" for job_id in held)} if held else {}
    answer = await rec.timed(conn, "GET", t.path(QUEUE), t.params(ttr=bench.TTR, count=100, **carried))
    if bench.expect(answer, 200, 404).status == 404:
        return None
    return [job["job_id"] for job in answer.json()]


async def ack_held(t: Target, rec: bench.Recorder, conn: Connection, held: list[str]) -> None:
    """The last ids, that no consume is left to carry: one batch ACK."""
    if held:
        bench.expect(await rec.timed(conn, "DELETE", t.path(QUEUE, "jobs"), t.params(job_id=",".join(held))), 204)


def carrier(t: Target) -> bench.Worker:
    """What a worker's consume loop would be with no cost of its own: one keep-alive connection of
    carrying consumes until the queue is empty, no handler."""

    async def run(rec: bench.Recorder) -> None:
        conn, held = t.connect(), []
        while rec.open and (found := await carrying_consume(t, rec, conn, held)) is not None:
            held = found
            rec.done(len(held))
        await ack_held(t, rec, conn, held)
        await conn.close()

    return run


async def raw_carriers(t: Target, procs: Processes, jobs: int, connections: int) -> Figures:
    await prefill(t, jobs)
    meter = Meter(procs, None)
    result = await bench.measure("carriers", meter, [carrier(t) for _ in range(connections)], DRAIN_TIMEOUT_S)
    server, redis = result.server_cpu_pct or 0.0, result.redis_cpu_pct or 0.0
    return Figures(result.jobs, result.seconds, server, redis, "bench", result.client_cpu_pct, result.other_cpu_pct)


# -- the worker ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One worker command line of the run: its handler, its --prefetch (None: the default), and
    whether its ACKs ride on its consumes (--ack-with-consume, the default) or go by batch ACK only."""

    handler: str
    prefetch: int | None
    carry: bool = True

    @property
    def name(self) -> str:
        if self.handler == RAW:
            return "raw-carriers"
        name = f"worker-{self.handler}" + ("" if self.prefetch is None else f"-p{self.prefetch}")
        return name if self.carry else name + "-batchack"


def worker_command(url: str, t: Target, concurrency: int, variant: Variant) -> list[str]:
    worker = [sys.executable, "-m", "lmstfy_py.cli", "worker", HANDLERS[variant.handler], "--url", url]
    more = ["--concurrency", str(concurrency), "--poll", "1", "--log-level", "warning"]  # poll: a quick stop
    if variant.prefetch is not None:
        more += ["--prefetch", str(variant.prefetch)]
    if not variant.carry:
        more.append("--no-ack-with-consume")
    return [*worker, "--namespace", t.ns, "--queue", QUEUE, *more]


def drained(stats: dict[str, int]) -> bool:
    return stats["ready"] == 0 and stats["delayed"] == 0 and stats["reserved"] == 0


def run_worker(url: str, t: Target, procs: Processes, jobs: int, concurrency: int, variant: Variant) -> Figures:
    uvloop.run(prefill(t, jobs))
    argv = worker_command(url, t, concurrency, variant)
    env = {**os.environ, "LMSTFY_TOKEN": t.token}
    with httpx.Client(base_url=url, headers={"X-Token": t.token}, timeout=10) as http:

        def stats() -> dict[str, int]:
            answer = http.get(f"/api/{t.ns}/{QUEUE}/stats")
            answer.raise_for_status()
            found: dict[str, int] = answer.json()
            return found

        with worker_process(argv, env) as proc:
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            while stats()["ready"] == jobs:
                check_running(proc, deadline)
                time.sleep(0.001)
            start = cpu_now(procs, proc.pid)
            while not drained(stats()):
                check_running(proc, deadline)
                time.sleep(POLL_S)
            end = cpu_now(procs, proc.pid)
    return figures_of(jobs, start, end)


def cpu_now(procs: Processes, worker_pid: int) -> tuple[float, ...]:
    """Wall time, then CPU seconds so far of: server, Redis, worker, this process, the whole machine."""
    server, redis = procs.snapshot()
    return (
        time.perf_counter(),
        server,
        redis,
        bench.cpu_seconds(worker_pid),
        time.process_time(),
        bench.machine_busy_seconds(),
    )


def figures_of(jobs: int, start: tuple[float, ...], end: tuple[float, ...]) -> Figures:
    seconds = end[0] - start[0]
    server, redis, worker, me, busy = (100 * (b - a) / seconds for a, b in zip(start[1:], end[1:], strict=True))
    return Figures(jobs, seconds, server, redis, "worker", worker, max(0.0, busy - server - redis - worker - me))


@contextmanager
def worker_process(argv: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"the worker exited with {proc.returncode}: {stderr.decode(errors='replace')}")


def check_running(proc: subprocess.Popen[bytes], deadline: float) -> None:
    if proc.poll() is not None:
        raise RuntimeError(f"the worker exited with {proc.returncode}")
    if time.monotonic() > deadline:
        raise RuntimeError(f"the worker did not drain the queue within {DRAIN_TIMEOUT_S:g} s")


CONSUME_API, BATCH_ACK_API = "/api/:namespace/:queue", "/api/:namespace/:queue/jobs"
METRICS_FLUSH_S = 1.2  # a server process writes its counts about once a second (metrics/pending.py)


def requests_of(admin: str, ns: str) -> str:
    """The consumes and batch ACKs the server counted for namespace `ns` (lmstfy's HTTP families),
    and their mean latency as the server saw it (of 2xx answers)."""
    time.sleep(METRICS_FLUSH_S)
    found: dict[tuple[str, str, str], float] = {}
    for line in httpx.get(f"{admin}/metrics", timeout=10).text.splitlines():
        name, _, value = line.rpartition(" ")
        if f'namespace="{ns}"' not in name or not name.startswith("infra_lmstfy_http_"):
            continue
        family, labels = name.split("{", 1)
        api = labels.split('api="', 1)[1].split('"', 1)[0]
        method = labels.split('method="', 1)[1].split('"', 1)[0]
        found[(family, api, method)] = found.get((family, api, method), 0.0) + float(value)
    shown = []
    for what, api, method in (("consumes", CONSUME_API, "GET"), ("batch ACKs", BATCH_ACK_API, "DELETE")):
        count = found.get(("infra_lmstfy_http_http_codes", api, method), 0.0)
        timed = found.get(("infra_lmstfy_http_latency_milliseconds_count", api, method), 0.0)
        total_ms = found.get(("infra_lmstfy_http_latency_milliseconds_sum", api, method), 0.0)
        shown.append(f"{what} {count:,.0f} (mean {total_ms / timed if timed else 0:.1f} ms)")
    return ", ".join(shown)


# -- rounds -----------------------------------------------------------------------------------------------


@contextmanager
def fresh_namespace(base: Target, admin: str, name: str) -> Iterator[Target]:
    ns = f"bench-{int(time.time() * 1000)}-{name}"
    try:
        yield replace(base, ns=ns, token=bench.create_token(admin, ns))
    finally:
        bench.purge(admin, ns)


def fmt(figures: Figures) -> str:
    text = f"{figures.jobs:,} jobs in {figures.seconds:.2f} s: {figures.jobs_per_s:>9,.0f} jobs/s  "
    text += f"cpu server {figures.server_cpu_pct:.0f}% redis {figures.redis_cpu_pct:.0f}%"
    text += f" {figures.consumer} {figures.consumer_cpu_pct:.0f}% other {figures.other_cpu_pct:.0f}%"
    return text + f"  {figures.cpu_us_per_job:.0f} µs cpu/job"


@dataclass
class Found:
    figures: dict[str, list[Figures]]  # of every run, by scenario
    ratios: dict[str, list[float]]  # worker variant -> its ratio in each round


def run_rounds(args: argparse.Namespace, url: str, admin: str) -> Found:
    data = bench.address_of(url)
    server_pid = bench.server_pid_by_port(data[1])
    procs = Processes(server_pid, bench.redis_child(server_pid, bench.parents()))
    base = Target(data, "", "", args.clients, 0.0, 0)
    print(f"bench_worker: server pids {procs}; {bench.machine()}", flush=True)
    variants = [
        Variant(h, p, carry == "on") for h in args.handlers for p in args.prefetch for carry in args.ack_with_consume
    ]
    if args.raw_carriers:  # the worker's pattern at no cost of its own: how far its own CPU is the gap
        variants.append(Variant(RAW, None))
    found = Found({"consume100_batch": [], **{v.name: [] for v in variants}}, {v.name: [] for v in variants})

    def batch_run(round_no: int, when: str) -> float:
        with fresh_namespace(base, admin, "batch") as t:
            batch = uvloop.run(consume100_batch(t, procs, args.jobs))  # as bench.py runs its clients
        found.figures["consume100_batch"].append(batch)
        print(f"round {round_no}: {'consume100_batch':<16} {fmt(batch)}  ({when})", flush=True)
        time.sleep(args.settle)
        return batch.jobs_per_s

    for round_no in range(1, args.rounds + 1):
        opening = batch_run(round_no, "opening")
        runs: list[tuple[Variant, Figures]] = []
        # Every other round runs the variants in the reverse order (A B, then B A): none always goes first.
        for variant in variants if round_no % 2 else variants[::-1]:
            with fresh_namespace(base, admin, variant.name) as t:
                if variant.handler == RAW:
                    figures = uvloop.run(raw_carriers(t, procs, args.jobs, args.raw_carriers))
                else:
                    figures = run_worker(url, t, procs, args.jobs, args.concurrency, variant)
                requests = requests_of(admin, t.ns)
            found.figures[variant.name].append(figures)
            runs.append((variant, figures))
            print(f"round {round_no}: {variant.name:<16} {fmt(figures)}", flush=True)
            print(f"round {round_no}: {variant.name:<16} requests: {requests}", flush=True)
            time.sleep(args.settle)
        # The machine's speed drifts within a round (a CPU-bound loop here varied 2x from one second
        # to the next, idle): each worker run is set against the mean of a batch run before and after.
        closing = batch_run(round_no, "closing")
        for variant, figures in runs:
            ratio = figures.jobs_per_s / ((opening + closing) / 2)
            found.ratios[variant.name].append(ratio)
            print(f"round {round_no}: {variant.name:<16} ÷ consume100_batch (mean of both) {ratio:.2f}", flush=True)
    return found


def report(found: Found) -> None:
    print("medians:", flush=True)
    for name, figures in found.figures.items():
        shown = f"  {name:<16} {statistics.median(f.jobs_per_s for f in figures):>9,.0f} jobs/s"
        if name in found.ratios:
            ratios = found.ratios[name]
            shown += f"  worker ÷ consume100_batch {statistics.median(ratios):.2f} (rounds: "
            shown += ", ".join(f"{r:.2f}" for r in ratios) + ")"
        print(shown, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="data API of a running server (default: start one)")
    parser.add_argument("--admin", help="its admin API")
    parser.add_argument("--server-workers", type=int, default=2, help="processes of the server it starts")
    parser.add_argument(
        "--http-server", choices=["hypercorn", "uvicorn"], default="hypercorn", help="of the server it starts"
    )
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--concurrency", type=int, default=64, help="the worker's --concurrency")
    parser.add_argument(
        "--prefetch",
        type=lambda s: [None if p == "default" else int(p) for p in s.split(",")],
        default=[None],
        help="the worker's --prefetch, or several (e.g. 0,64,default) run in turn each round",
    )
    parser.add_argument(
        "--ack-with-consume",
        type=lambda s: bench.names(s, ["on", "off"]),
        default=["on"],
        help="the worker's ACKs with its consumes (on), by batch ACK only (off), or both in turn (on,off)",
    )
    parser.add_argument("--clients", type=int, default=32, help="consume100_batch connections (and prefill's)")
    parser.add_argument(
        "--handlers",
        type=lambda s: bench.names(s, list(HANDLERS)),
        default=["async", "sync"],
        help=f"of {', '.join(HANDLERS)}: no-op, no-op on threads, waiting 5 ms",
    )
    parser.add_argument(
        "--raw-carriers",
        type=int,
        default=0,
        metavar="N",
        help="also run, each round, N raw connections consuming as the worker does (count=100, ACKs carried) "
        "with no handler and no client library: the worker's pattern without its own CPU (0: not run)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of rest after each run")
    args = parser.parse_args(argv)
    if bool(args.url) != bool(args.admin):
        parser.error("give both --url and --admin, or neither")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.url:
        report(run_rounds(args, args.url, args.admin))
        return
    with (
        tempfile.TemporaryDirectory(prefix="bench-worker-") as workdir,
        Server(Path(workdir), args=["--workers", str(args.server_workers)], http_server=args.http_server) as server,
    ):
        server.start()
        report(run_rounds(args, server.data_url, server.admin_url))
        print(f"server stop exit code: {server.stop()}", flush=True)


if __name__ == "__main__":
    main()
