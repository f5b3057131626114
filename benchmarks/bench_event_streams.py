#!/usr/bin/env python3
"""Open event streams vs none on one server process: the publish rate (SPEC 13, issue 28's target:
1,000 open streams keep it within 10 %).

Starts `lmstfy-py serve --workers 1` (its embedded Redis), turns `events` on for the published queue,
and alternates rounds, who goes first alternating: bench.py's publish load alone, then with
`--streams` streams open. `--watch other` (the target's case): the streams watch another queue of the
namespace, which records events too, and get only heartbeats: what holding them open costs.
`--watch same`: they watch the published queue and each reads every frame, so every publish is
sent `--streams` times (fan-out). Prints each round's publish rate and the server's and its Redis's
CPU per publish, the frames the streams received, and the medians' ratios. Before each round the
server is left to finish what the previous one gave it (its CPU back under IDLE_PCT).

    .venv/bin/python -m benchmarks.bench_event_streams --streams 1000 --rounds 3 --duration 8 --watch other
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import bench
from benchmarks.harness.lmstfy_servers import Server, create_token

NS, QUEUE, OTHER = "streams", "q", "watched"
OPEN_AT_ONCE = 100  # streams opened concurrently
IDLE_PCT = 15.0  # server CPU (% of a core) under which a round may start
IDLE_WAIT_S = 60.0


class Streams:
    """`count` raw HTTP/1.1 event streams of the queue, each read to the end by a task of its own."""

    def __init__(self, server: Server, token: str, queue: str) -> None:
        self.server, self.token, self.queue = server, token, queue
        self.frames = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._writers: list[asyncio.StreamWriter] = []

    async def open(self, count: int) -> None:
        for start in range(0, count, OPEN_AT_ONCE):
            await asyncio.gather(*(self._open_one() for _ in range(min(OPEN_AT_ONCE, count - start))))

    async def _open_one(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        writer.write(f"GET /api/{NS}/{self.queue}/events?token={self.token} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream refused: {head!r}")
        self._writers.append(writer)
        self._tasks.append(asyncio.create_task(self._read(reader)))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(65536):
            self.frames += chunk.count(b"\nevent: ")

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks, self._writers = [], []


def meter_of(server: Server) -> bench.Meter:
    procs = bench.find_processes(argparse.Namespace(server_pid=None, redis_pid=None), server.port)
    target = bench.find_redis_target(argparse.Namespace(redis_socket=None, redis_url=None), procs and procs.redis)
    return bench.Meter(procs, target.client() if target else None)


def cpu_us(result: bench.Result) -> float:
    """Server + Redis CPU µs per publish."""
    return 1e4 * ((result.server_cpu_pct or 0.0) + (result.redis_cpu_pct or 0.0)) / max(result.req_per_s, 1.0)


async def until_idle(meter: bench.Meter) -> None:
    """Until the server's CPU is back under IDLE_PCT: frames still on their way to the previous round's
    streams are not the next round's cost."""
    deadline = time.monotonic() + IDLE_WAIT_S
    while meter.procs is not None and time.monotonic() < deadline:
        before = meter.procs.snapshot()[0]
        await asyncio.sleep(0.5)
        if 100 * (meter.procs.snapshot()[0] - before) / 0.5 < IDLE_PCT:
            return


async def one_round(args: argparse.Namespace, server: Server, token: str, streams: int) -> bench.Result:
    await until_idle(meter_of(server))
    opened = Streams(server, token, QUEUE if args.watch == "same" else OTHER)
    await opened.open(streams)
    await asyncio.sleep(args.settle)
    target = bench.Target(("127.0.0.1", server.port), NS, token, args.clients, args.duration, 1)
    workers = [bench.publisher(target, QUEUE) for _ in range(args.clients)]
    result = await bench.measure("publish", meter_of(server), workers, args.duration)
    await asyncio.sleep(0.5)  # the last publishes' frames on their way
    await opened.close()
    expected = result.requests * streams if args.watch == "same" else 0
    print(
        f"  {streams:>5} streams: {result.req_per_s:>9,.0f} publishes/s, CPU {cpu_us(result):>6,.0f} µs/publish "
        f"(server {result.server_cpu_pct or 0:.0f}%, redis {result.redis_cpu_pct or 0:.0f}%), "
        f"frames received {opened.frames:,} (publishes x streams in the window: {expected:,})",
        flush=True,
    )
    return result


async def run(args: argparse.Namespace, server: Server) -> None:
    token = create_token(server, NS)
    for queue in (QUEUE, OTHER):
        settings = f"{server.admin_url}/queues/{NS}/{queue}/settings"
        httpx.put(settings, params={"events": args.events}).raise_for_status()
    rates: dict[int, list[float]] = {0: [], args.streams: []}
    cpu: dict[int, list[float]] = {0: [], args.streams: []}
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}/{args.rounds}", flush=True)
        order = [0, args.streams] if round_ % 2 == 0 else [args.streams, 0]
        for streams in order:
            result = await one_round(args, server, token, streams)
            rates[streams].append(result.req_per_s)
            cpu[streams].append(cpu_us(result))
    none, some = (statistics.median(rates[n]) for n in (0, args.streams))
    cpu_none, cpu_some = (statistics.median(cpu[n]) for n in (0, args.streams))
    print(f"publish rate, median: {none:,.0f}/s with no stream, {some:,.0f}/s with {args.streams} open ({args.watch})")
    print(f"ratio with/without: rate {some / none:.3f}, CPU per publish {cpu_some / max(cpu_none, 1e-9):.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000, help="streams open in the rounds with streams")
    parser.add_argument("--watch", choices=["other", "same"], default="other", help="the queue the streams watch")
    parser.add_argument("--events", type=int, default=100_000, help="the queue's events setting")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (alternated)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of publish load per round")
    parser.add_argument("--clients", type=int, default=32, help="publishing connections")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between opening streams and the load")
    parser.add_argument("--http-server", choices=["hypercorn", "uvicorn"], help="the server's (default: its own)")
    args = parser.parse_args(argv)
    # Each stream is a socket on both sides, all in this machine's two processes.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.streams + 1024)), hard))
    with tempfile.TemporaryDirectory() as workdir:
        server = Server(Path(workdir), args=["--workers", "1"], http_server=args.http_server)
        with server:
            server.start()
            print(f"bench_event_streams: server on {server.data_url}, {bench.machine()}", flush=True)
            asyncio.run(run(args, server))


if __name__ == "__main__":
    main()
