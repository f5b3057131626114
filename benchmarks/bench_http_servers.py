#!/usr/bin/env python3
"""Would an ASGI server with a C/Rust HTTP parser lift lmstfy-py's HTTP ceiling? Measure it.

The same trivial ASGI app (200 `{"msg":"ok"}`) is served, one server after the other, by
(a) hypercorn exactly as lmstfy-py serves (benchmarks/trivial_app.py: h11, uvloop, SO_REUSEPORT
per worker), (b) uvicorn with uvloop + httptools and (c) granian (Rust, if installed), then
loaded with bench.py's keep-alive GETs (its trivial_loader, on benchmarks/loadclient.py). Each round prints req/s,
p50/p99, the server's CPU (its whole process tree, from /proc) and req per server CPU-second;
the summary gives medians and the median ratio to hypercorn within a round (the machine is
shared: ratios within a round are steadier than absolute figures).

uvicorn and granian come from a scratch venv (`--python`), never from the project's:

    python3 -m venv /tmp/cparser
    /tmp/cparser/bin/pip install 'uvicorn[standard]' granian starlette uvloop httptools
    .venv/bin/python -m benchmarks.bench_http_servers --python /tmp/cparser/bin/python --workers 2

This module is also the app uvicorn and granian import (from the scratch venv): only the
standard library at the top; the load side imports bench.py (httpx ...) inside functions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.ports import free_port

HERE = Path(__file__).resolve().parent
SERVERS = ("hypercorn", "uvicorn", "granian")
START_TIMEOUT = 20.0
# Every worker up, not just the first to answer (uvicorn and granian spawn theirs one by one).
SETTLE_S = 1.5
STOP_TIMEOUT = 10.0

# -- the app (trivial_app.py serves this one too) ------------------------------------------

BODY = b'{"msg":"ok"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def raw_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):  # the request body, read as any endpoint must
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


def starlette_app() -> Any:
    """trivial_app.py's one-route Starlette app (a factory: the scratch venv imports starlette)."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def ok(request: Any) -> Response:
        return Response(BODY, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", ok, methods=["GET", "PUT", "POST", "DELETE"])])


# -- the servers ---------------------------------------------------------------------------


def server_argv(server: str, args: argparse.Namespace, port: int) -> list[str]:
    if server == "hypercorn":
        return [
            sys.executable,
            "-m",
            "benchmarks.trivial_app",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--app",
            args.app,
        ]
    target = "bench_http_servers:raw_app" if args.app == "raw" else "bench_http_servers:starlette_app"
    factory = [] if args.app == "raw" else ["--factory"]
    common = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(args.workers), "--loop", "uvloop"]
    if server == "uvicorn":
        where = ["--app-dir", str(HERE), "--http", "httptools", "--no-access-log", "--log-level", "warning"]
        return [args.python, "-m", "uvicorn", *common, *where, *factory, target]
    where = ["--working-dir", str(HERE), "--interface", "asgi", "--no-access-log", "--log-level", "warning"]
    return [args.python, "-m", "granian", *common, *where, *factory, target]


def version_of(python: str, module: str) -> str | None:
    code = f"import importlib.metadata as m; print(m.version({module!r}))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@contextlib.contextmanager
def running(argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """A server in its own process group, so the whole group (every worker) is stopped after, even on Ctrl-C."""
    proc = subprocess.Popen(argv, cwd=HERE.parent, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # workers the supervisor left behind


# -- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    req_per_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_pct: float
    client_cpu_pct: float
    other_cpu_pct: float
    worker_cpu_pct: list[float]  # per process of the server's tree: an unbalanced accept shows here

    @property
    def req_per_cpu_s(self) -> float:
        return self.req_per_s / (self.server_cpu_pct / 100) if self.server_cpu_pct else 0.0


def tree_cpu(root: int) -> dict[int, float]:
    from benchmarks.bench import cpu_seconds, descendants, parents

    return {pid: cpu_seconds(pid) for pid in descendants(root, parents())}


async def wait_answering(port: int, proc: subprocess.Popen[bytes]) -> None:
    from benchmarks.loadclient import Connection

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        conn = Connection("127.0.0.1", port)
        try:
            if (await conn.request("GET", "/")).status == 200:
                await asyncio.sleep(SETTLE_S)
                return
        except (OSError, ConnectionError):
            await asyncio.sleep(0.05)
        finally:
            await conn.close()
    raise RuntimeError(f"server did not answer within {START_TIMEOUT:g} s")


async def measure_server(server: str, args: argparse.Namespace) -> Sample:
    from benchmarks import bench

    port = free_port()
    with running(server_argv(server, args, port)) as proc:
        await wait_answering(port, proc)
        target = bench.Target(("127.0.0.1", port), "x", "x", args.clients, args.duration, 0)
        meter = bench.Meter(bench.Processes(proc.pid, None), None)
        before = tree_cpu(proc.pid)
        getters = [bench.trivial_loader(target, "GET", b"") for _ in range(args.clients)]
        try:
            result = await bench.measure(server, meter, getters, args.duration)
        except asyncio.CancelledError:
            # Interrupted: the getters' tasks outlive measure; stopped before their server, none reports a lost link.
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
            raise
        after = tree_cpu(proc.pid)
    split = sorted((100 * (after[pid] - before.get(pid, 0.0)) / result.seconds for pid in after), reverse=True)
    return Sample(
        result.req_per_s,
        result.p50_ms,
        result.p99_ms,
        result.server_cpu_pct or 0.0,
        result.client_cpu_pct,
        result.other_cpu_pct,
        [round(pct) for pct in split if pct >= 1],
    )


def print_sample(server: str, sample: Sample, baseline: Sample | None) -> None:
    ratio = f"{sample.req_per_s / baseline.req_per_s:5.2f}x" if baseline else "     -"
    print(
        f"  {server:<10} {sample.req_per_s:8,.0f} req/s {ratio}  p50 {sample.p50_ms:5.2f} ms  "
        f"p99 {sample.p99_ms:6.2f} ms  server CPU {sample.server_cpu_pct:4.0f}% {sample.worker_cpu_pct}  "
        f"{sample.req_per_cpu_s:7,.0f} req/CPU-s  client CPU {sample.client_cpu_pct:3.0f}%  "
        f"other {sample.other_cpu_pct:3.0f}%",
        flush=True,
    )


async def run_rounds(args: argparse.Namespace, servers: list[str]) -> dict[str, list[Sample]]:
    # SIGTERM cancels the rounds as asyncio.Runner does on Ctrl-C: `running` then stops the server under test.
    this = asyncio.current_task()
    assert this is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, this.cancel)
    samples: dict[str, list[Sample]] = {server: [] for server in servers}
    for number in range(args.rounds):
        print(f"round {number + 1}: loadavg {Path('/proc/loadavg').read_text().strip()}", flush=True)
        # Rotated each round, so no server always runs first (or right after the busiest one).
        for server in servers[number % len(servers) :] + servers[: number % len(servers)]:
            samples[server].append(await measure_server(server, args))
        for server in servers:  # printed in a fixed order, hypercorn first, once the round is done
            print_sample(server, samples[server][-1], None if server == "hypercorn" else samples["hypercorn"][-1])
    return samples


def print_summary(samples: dict[str, list[Sample]]) -> None:
    print("medians (ratio = median over rounds of req/s ÷ hypercorn's req/s in the same round):")
    base = samples["hypercorn"]
    for server, runs in samples.items():
        ratio = statistics.median(s.req_per_s / b.req_per_s for s, b in zip(runs, base, strict=True))
        cpu_ratio = statistics.median(s.req_per_cpu_s / b.req_per_cpu_s for s, b in zip(runs, base, strict=True))
        print(
            f"  {server:<10} {statistics.median(s.req_per_s for s in runs):8,.0f} req/s  {ratio:4.2f}x  "
            f"p50 {statistics.median(s.p50_ms for s in runs):5.2f} ms  "
            f"p99 {statistics.median(s.p99_ms for s in runs):6.2f} ms  "
            f"{statistics.median(s.req_per_cpu_s for s in runs):7,.0f} req/CPU-s  {cpu_ratio:4.2f}x"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="/tmp/cparser/bin/python", help="the scratch venv's interpreter")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--app", choices=["raw", "starlette"], default="raw")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per server and round")
    parser.add_argument("--clients", type=int, default=32, help="keep-alive connections")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    # A background job starts with SIGINT ignored, and asyncio.Runner turns SIGINT into a cancel
    # only when the default handler is in place: Ctrl-C or `kill -INT` must stop the bench anyway.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    servers = [s for s in SERVERS if s == "hypercorn" or version_of(args.python, s)]
    versions = {s: version_of(sys.executable if s == "hypercorn" else args.python, s) for s in SERVERS}
    print(
        f"{args.app} app, {args.workers} workers, {args.clients} connections, {args.duration:g} s; versions {versions}"
    )
    import uvloop  # the load generator's loop, as bench.py's

    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            samples = runner.run(run_rounds(args, servers))
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit("interrupted: every server started was stopped")
    print_summary(samples)


if __name__ == "__main__":
    main()
