#!/usr/bin/env python3
"""Issue 30: what exporting the spans of traced jobs costs (SPEC 15, "Export").

Three `lmstfy-py serve --workers 1` on one real Redis, measured in one run:

`off`: no --otlp-endpoint (the job's trace context is kept and returned all the same);
`export`: --otlp-endpoint to a real OTLP/HTTP receiver (benchmarks/harness/otlp_receiver.py, in
    this process, decoding every POST);
`dead`: --otlp-endpoint to a collector that accepts connections and never answers.

Cases: off and export with sampled traceparents (flags 01: every publish, consume and ACK makes a
span), export with unsampled ones (flags 00: nothing exported), dead with sampled ones. Each round
runs every case in turn, the order alternating (a b c d, d c b a, ...): `publish` (--clients
keep-alive connections, each request with its own traceparent) for --duration s, then
`consume+ACK` (count=1 consume then ACK, --clients connections) of those jobs for --duration s.
Printed per case: requests/s, the server process's CPU per request (/proc), p50/p99, and the ratio
of each to `off` within the round; then the medians of the ratios, the dead server's
lmstfy_otlp_spans_dropped_total and the spans the receiver decoded. Last, what one span costs in
process, apart from any server's noise: making it on the request's path (SpanExport.traced) and
encoding it on the export thread (tracing/otlp.py), CPU per span, the median of --rounds runs.

    .venv/bin/python -m benchmarks.bench_tracing [--rounds 3] [--duration 3] [--clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import bench
from benchmarks.harness.lmstfy_servers import Server, create_token
from benchmarks.harness.otlp_receiver import OtlpReceiver, silent_collector
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.tracing.bounded import BATCH

NS = "bench"
CASES = (("off", "01"), ("export", "01"), ("export", "00"), ("dead", "01"))


@dataclass(frozen=True)
class Case:
    server: str
    flags: str

    @property
    def name(self) -> str:
        return f"{self.server}/{'sampled' if self.flags == '01' else 'unsampled'}"


@dataclass(frozen=True)
class Figures:
    per_s: float
    cpu_us: float  # server CPU per request
    p50_ms: float
    p99_ms: float

    @classmethod
    def of(cls, result: bench.Result) -> Figures:
        cpu_s = (result.server_cpu_pct or 0.0) / 100 * result.seconds
        return cls(result.req_per_s, 1e6 * cpu_s / max(result.requests, 1), result.p50_ms, result.p99_ms)


def traceparents(flags: str) -> Iterator[dict[str, str]]:
    while True:
        yield {"traceparent": f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-{flags}"}


def traced_publisher(t: bench.Target, queue: str, flags: str) -> bench.Worker:
    async def run(rec: bench.Recorder) -> None:
        conn, headers = t.connect(), traceparents(flags)
        while rec.open:
            answer = await rec.timed(conn, "PUT", t.path(queue), t.params(), bench.PAYLOAD, next(headers))
            bench.expect(answer, 201)
            rec.done()
        await conn.close()

    return run


async def measure_case(server: Server, token: str, case: Case, queue: str, args: argparse.Namespace) -> list[Figures]:
    t = bench.Target(("127.0.0.1", server.port), NS, token, args.clients, args.duration, 1)
    assert server.proc is not None
    meter = bench.Meter(bench.Processes(server.proc.pid, None), None)
    workers = [traced_publisher(t, queue, case.flags) for _ in range(args.clients)]
    published = await bench.measure("publish", meter, workers, args.duration)
    await asyncio.sleep(args.settle)
    consumed = await bench.measure(
        "consume_ack", meter, [bench.consumer(t, queue) for _ in range(args.clients)], args.duration
    )
    await asyncio.sleep(args.settle)
    return [Figures.of(published), Figures.of(consumed)]


def dropped(server: Server) -> float:
    text = httpx.get(f"{server.admin_url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lmstfy_otlp_spans_dropped_total"
    )


def line(name: str, figures: Figures, base: Figures) -> str:
    return (
        f"  {name:<28} {figures.per_s:>8,.0f} req/s ({figures.per_s / base.per_s:4.2f})  "
        f"cpu {figures.cpu_us:>6.0f} us/req ({figures.cpu_us / base.cpu_us:4.2f})  "
        f"p50 {figures.p50_ms:5.2f} ms  p99 {figures.p99_ms:6.2f} ms ({figures.p99_ms / base.p99_ms:4.2f})"
    )


def span_cost(rounds: int, spans: int = 5120) -> tuple[float, float, float]:
    """CPU µs per span: made by `traced` (the request's path), encoded (the export thread), and
    encoded as the SDK's OTLPSpanExporter would (what tracing/otlp.py replaced)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from lmstfy_py.store.engine_base import TracedStep
    from lmstfy_py.tracing.export import SpanExport
    from lmstfy_py.tracing.otlp import encode
    from lmstfy_py.types import TraceContext

    async def measure() -> tuple[float, float, float]:
        export = SpanExport("http://127.0.0.1:9", "bench")  # nothing is sent: its batching is bypassed
        made: list[Any] = []
        export.batch.on_end = made.append  # type: ignore[method-assign]
        trace = TraceContext(f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01")
        steps = [TracedStep("publish", "default", NS, "q", f"job-{i:06d}", trace, 1, 2) for i in range(spans)]
        started = time.process_time()
        for step in steps:
            export.traced(step)
        between = time.process_time()
        exporter = export.batch.exporter
        for first in range(0, spans, BATCH):
            encode(made[first : first + BATCH], exporter.resource, exporter.scope)
        ended = time.process_time()
        for first in range(0, spans, BATCH):
            encode_spans(made[first : first + BATCH]).SerializePartialToString()
        sdk = time.process_time()
        await export.close()
        return tuple(1e6 * (b - a) / spans for a, b in ((started, between), (between, ended), (ended, sdk)))  # type: ignore[return-value]

    results = [asyncio.run(measure()) for _ in range(rounds)]
    return tuple(statistics.median(r[i] for r in results) for i in range(3))  # type: ignore[return-value]


def run(args: argparse.Namespace) -> None:
    cases = [Case(*case) for case in CASES]
    ratios: dict[str, list[tuple[float, float, float]]] = {}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lmstfy-tracing-")))
        redis = RedisProcess(workdir / "redis")
        redis.start()
        stack.callback(redis.stop)
        receiver = stack.enter_context(OtlpReceiver())
        endpoints = {"off": [], "export": ["--otlp-endpoint", receiver.url]}
        endpoints["dead"] = ["--otlp-endpoint", stack.enter_context(silent_collector())]
        servers: dict[str, Server] = {}
        for name, flags in endpoints.items():
            server = Server(workdir / name, redis_url=redis.url, args=["--workers", "1", *flags])
            servers[name] = stack.enter_context(server)
            server.start()
        tokens = {name: create_token(server, NS, "bench_tracing") for name, server in servers.items()}
        for number in range(args.rounds):
            order = cases if number % 2 == 0 else cases[::-1]
            measured = {}
            for case in order:
                queue = f"q{number}-{case.server}-{case.flags}"
                measured[case.name] = asyncio.run(
                    measure_case(servers[case.server], tokens[case.server], case, queue, args)
                )
            print(f"round {number + 1}:", flush=True)
            base = measured["off/sampled"]
            for case in cases:
                for phase, figures, base_figures in zip(
                    ("publish", "consume+ACK"), measured[case.name], base, strict=True
                ):
                    print(line(f"{case.name} {phase}", figures, base_figures), flush=True)
                    key = f"{case.name} {phase}"
                    ratios.setdefault(key, []).append(
                        (
                            figures.per_s / base_figures.per_s,
                            figures.cpu_us / base_figures.cpu_us,
                            figures.p99_ms / base_figures.p99_ms,
                        )
                    )
        print(f"medians of {args.rounds} rounds (ratio to off/sampled in the same round: req/s, CPU per request, p99):")
        for key, values in ratios.items():
            rate, cpu, p99 = (statistics.median(v[i] for v in values) for i in range(3))
            print(f"  {key:<28} req/s {rate:4.2f}  cpu {cpu:4.2f}  p99 {p99:4.2f}")
        print(f"dead collector: lmstfy_otlp_spans_dropped_total {dropped(servers['dead']):,.0f}")
        print(f"receiver: {len(receiver.spans):,} spans decoded")
    make_us, encode_us, sdk_us = span_cost(args.rounds)
    print(
        f"one span, in process: made {make_us:.1f} us + encoded {encode_us:.1f} us of CPU "
        f"(the SDK's OTLPSpanExporter would encode it in {sdk_us:.1f} us; median of {args.rounds})"
    )
    print(
        f"setup: {args.clients} clients, {args.duration:g} s per phase, servers --workers 1 on one Redis; "
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of each phase")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--settle", type=float, default=0.5, help="rest after each measured window")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
