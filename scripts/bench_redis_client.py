#!/usr/bin/env python3
"""What one Redis round trip costs a worker: redis-py as lmstfy-py uses it, against a minimal
auto-pipelining client, both on uvloop with concurrent callers like a loaded worker's.

redis-py gives each concurrent command a connection of its own: a write system call per
command and a read event per reply. A client that queues the commands of one event-loop
turn and writes them at once on one connection (and parses the replies of one read together)
pays those per turn instead. This measures how much that would save, as the proposal in
docs/PERFORMANCE.md; it is a measurement, not a client lmstfy-py uses.

    .venv/bin/python scripts/bench_redis_client.py --redis-url unix:///path/to/redis.sock
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hiredis
import uvloop

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.scripts import Script

SCRIPT = Script("one", "return 1")


class PipeliningClient(asyncio.Protocol):
    """Commands of one loop turn go out in one write; replies are matched in order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.outgoing: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.waiting.popleft().set_result(reply)

    def call(self, *args: str | int) -> asyncio.Future[Any]:
        if not self.outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self.outgoing.append(_pack(args))
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        return future

    def _flush(self) -> None:
        assert self.transport is not None
        self.transport.write(b"".join(self.outgoing))
        self.outgoing.clear()


def _pack(args: tuple[str | int, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(call: Callable[[], Awaitable[Any]], callers: int, commands: int) -> tuple[float, float]:
    """Commands per second and CPU microseconds per command, `callers` tasks in parallel."""
    each = commands // callers

    async def caller() -> None:
        for _ in range(each):
            await call()

    cpu, start = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    done = each * callers
    return done / (time.perf_counter() - start), 1e6 * (cpu_seconds() - cpu) / done


async def redis_py(url: str) -> Callable[[], Awaitable[Any]]:
    client, _ = pools.connect(PoolConfig("default", url=url))
    await client.script_load(SCRIPT.source)
    return lambda: SCRIPT(client, [], [])


async def pipelining(url: str) -> Callable[[], Awaitable[Any]]:
    loop = asyncio.get_running_loop()
    if url.startswith("unix://"):
        _, client = await loop.create_unix_connection(PipeliningClient, url[len("unix://") :])
    else:
        host, _, port = url.removeprefix("redis://").split("/")[0].partition(":")
        _, client = await loop.create_connection(PipeliningClient, host, int(port or 6379))
    await client.call("SCRIPT", "LOAD", SCRIPT.source)
    return lambda: client.call("EVALSHA", SCRIPT.sha, 0)


async def main(args: argparse.Namespace) -> None:
    clients = {
        "redis-py (lmstfy-py's pool)": await redis_py(args.redis_url),
        "auto-pipelining": await pipelining(args.redis_url),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for _ in range(args.rounds):
        for name, call in clients.items():
            figures[name].append(await measure(call, args.callers, args.commands))
    base = statistics.median(cpu for _, cpu in figures["redis-py (lmstfy-py's pool)"])
    print(f"EVALSHA of a script returning 1, {args.callers} concurrent callers, median of {args.rounds} rounds:")
    for name, runs in figures.items():
        rate, cpu = statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs)
        print(f"  {name:<28} {rate:9,.0f} cmd/s  {cpu:5.1f} µs CPU per command  ({cpu / base:.2f} x redis-py)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--commands", type=int, default=64_000)
    parser.add_argument("--rounds", type=int, default=5)
    uvloop.run(main(parser.parse_args()))
