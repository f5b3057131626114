#!/usr/bin/env python3
"""Push delivery speed and idle cost of lmstfy-py (SPEC section 8), measured on a real server.

1. Deliveries: --jobs jobs are published (bulk, 64 a request) to an idle queue, then a push
   group with --group-workers deliveries at once (per server process, as lmstfy's `workers`) is
   created for it, pointed at a local endpoint that answers 200 at once. Measured from the
   group's creation until the endpoint got every job and the queue is empty (every job ACKed):
   deliveries/s, and the CPU time the server (all its workers, not its Redis), its Redis and the
   endpoint spent per delivery. --rounds rounds; the median is printed last.
2. Idle cost: --idle-groups push groups on empty queues; the server's CPU over --idle-seconds,
   next to the same window without any group (the baseline), in % of one core.

Starts its own `lmstfy-py serve` (embedded Redis in a temporary dir, --server-workers
processes) and the endpoint (a separate process, aiohttp, so its CPU is its own) on loopback.

Reference (SPEC section 8): Go lmstfy 1.0.10's pusher delivers 2.4k-3.6k jobs/s with 16 workers
to a local endpoint answering 200 at once, on this machine class.

    .venv/bin/python -m benchmarks.bench_push
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.bench import cpu_seconds
from benchmarks.harness.lmstfy_servers import Server, create_token, free_port

NS = "bench-push"
POLL_S = 0.02
DELIVERY_TIMEOUT_S = 300.0

ENDPOINT = """
import sys
from aiohttp import web

count = 0

async def deliver(request):
    global count
    await request.read()
    count += 1
    return web.Response(text="ok")

async def counted(request):
    return web.Response(text=str(count))

app = web.Application()
app.router.add_post("/{tail:.*}", deliver)
app.router.add_get("/count", counted)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


@dataclass(frozen=True)
class Round:
    jobs: int
    seconds: float
    server_cpu_s: float
    redis_cpu_s: float
    endpoint_cpu_s: float
    other_cpu_s: float  # the rest of the machine (this program included): above ~10% of the window, noisy

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds

    def line(self) -> str:
        per_job = 1e6 / self.jobs
        return (
            f"{self.per_s:,.0f} deliveries/s ({self.jobs} in {self.seconds:.2f} s); CPU per delivery: "
            f"server {self.server_cpu_s * per_job:.0f} us, redis {self.redis_cpu_s * per_job:.0f} us, "
            f"endpoint {self.endpoint_cpu_s * per_job:.0f} us; CPU other {100 * self.other_cpu_s / self.seconds:.0f}%"
        )


class Endpoint:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-c", ENDPOINT, str(self.port)])
        deadline = time.monotonic() + 10
        while True:
            try:
                self.count()
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the endpoint did not start") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def count(self) -> int:
        return int(httpx.get(f"http://127.0.0.1:{self.port}/count", timeout=5).text)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def prefill(server: Server, token: str, queue: str, jobs: int) -> None:
    with httpx.Client(base_url=server.data_url, timeout=30) as client:
        for start in range(0, jobs, 64):
            batch = json.dumps([f"job {i}" for i in range(start, min(start + 64, jobs))]).encode()
            answer = client.put(f"/api/{NS}/{queue}/bulk", params={"token": token}, content=batch)
            assert answer.status_code == 201, answer.text


def queue_size(server: Server, queue: str) -> int:
    size: int = httpx.get(f"{server.data_url}/api/{NS}/{queue}/size", timeout=5).json()["size"]
    return size


def create_group(server: Server, group: str, queue: str, endpoint: str, workers: int) -> None:
    body = {"queues": [queue], "endpoint": endpoint, "workers": workers, "timeout": 30}
    answer = httpx.post(f"{server.admin_url}/pusher/{NS}/{group}", json=body, timeout=5)
    assert answer.status_code == 201, answer.text


def delete_group(server: Server, group: str) -> None:
    assert httpx.delete(f"{server.admin_url}/pusher/{NS}/{group}", timeout=5).status_code == 200


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_now(server: Server, endpoint: Endpoint) -> tuple[float, float, float, float]:
    """Server, Redis, endpoint, and the whole machine's busy CPU seconds."""
    return (
        sum(map(cpu_seconds, server.pids())),
        cpu_seconds(server.redis_pid),
        cpu_seconds(endpoint.proc.pid),
        machine_busy_seconds(),
    )


def delivery_round(server: Server, endpoint: Endpoint, token: str, number: int, args: argparse.Namespace) -> Round:
    queue, group = f"q{number}", f"g{number}"
    prefill(server, token, queue, args.jobs)
    time.sleep(args.settle)
    delivered_before = endpoint.count()
    cpu_before = cpu_now(server, endpoint)
    started = time.monotonic()
    create_group(server, group, queue, endpoint.url, args.group_workers)
    deadline = started + DELIVERY_TIMEOUT_S
    while endpoint.count() - delivered_before < args.jobs or queue_size(server, queue):
        if time.monotonic() > deadline:
            raise RuntimeError(f"round {number}: {endpoint.count() - delivered_before} of {args.jobs} delivered")
        time.sleep(POLL_S)
    seconds = time.monotonic() - started
    cpu_after = cpu_now(server, endpoint)
    delete_group(server, group)
    server_s, redis_s, endpoint_s, machine_s = [
        after - before for after, before in zip(cpu_after, cpu_before, strict=True)
    ]
    other_s = max(0.0, machine_s - server_s - redis_s - endpoint_s)
    return Round(endpoint.count() - delivered_before, seconds, server_s, redis_s, endpoint_s, other_s)


def server_cpu_pct(server: Server, seconds: float) -> float:
    before = sum(map(cpu_seconds, server.pids()))
    time.sleep(seconds)
    return 100 * (sum(map(cpu_seconds, server.pids())) - before) / seconds


def idle_cost(server: Server, endpoint: Endpoint, args: argparse.Namespace) -> tuple[float, float]:
    """The server's CPU (% of a core) without any group, then with --idle-groups idle ones."""
    time.sleep(args.settle)
    baseline = server_cpu_pct(server, args.idle_seconds)
    for i in range(args.idle_groups):
        create_group(server, f"idle{i}", f"idle{i}", endpoint.url, 1)
    time.sleep(args.settle)
    with_groups = server_cpu_pct(server, args.idle_seconds)
    for i in range(args.idle_groups):
        delete_group(server, f"idle{i}")
    return baseline, with_groups


def run(args: argparse.Namespace) -> None:
    endpoint = Endpoint()
    workdir = Path(tempfile.mkdtemp(prefix="lmstfy-push-"))
    try:
        with Server(workdir, args=["--workers", str(args.server_workers)]) as server:
            server.start()
            token = create_token(server, NS, "bench_push")
            rounds = []
            for number in range(args.rounds):
                rounds.append(delivery_round(server, endpoint, token, number, args))
                print(f"round {number + 1}: {rounds[-1].line()}", flush=True)
            median = sorted(rounds, key=lambda r: r.per_s)[len(rounds) // 2]
            print(f"median: {median.line()}")
            rates = [r.per_s for r in rounds]
            print(f"deliveries/s: median {statistics.median(rates):,.0f}, min {min(rates):,.0f}, max {max(rates):,.0f}")
            baseline, idle = idle_cost(server, endpoint, args)
            print(
                f"idle: server {baseline:.2f}% of a core without push groups, {idle:.2f}% with "
                f"{args.idle_groups} idle groups (+{idle - baseline:.2f}%, over {args.idle_seconds:g} s each)"
            )
            server.stop()
    finally:
        endpoint.close()
    print(
        f"setup: {args.server_workers} server processes, group workers {args.group_workers} per process, "
        f"{args.jobs} jobs per round; machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--group-workers", type=int, default=16, help="the group's workers (per server process)")
    parser.add_argument("--server-workers", type=int, default=2, help="lmstfy-py serve --workers")
    parser.add_argument("--idle-groups", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--settle", type=float, default=2.0, help="rest before each measured window")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
