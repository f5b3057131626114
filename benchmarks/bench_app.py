#!/usr/bin/env python3
"""What lmstfy-py's own code costs per request, without any HTTP server: the data app's ASGI
callable driven directly by concurrent callers (as hypercorn would call it), on a real Redis.

Subtracted from the server CPU per request that benchmarks/bench.py measures, it splits a request
between the HTTP server (hypercorn, h11, the event loop's socket work) and lmstfy-py (routing,
token check, parameters, the Redis call, JSON, metrics). Figures are µs of CPU of this process
per request, on uvloop, median of --rounds rounds.

    .venv/bin/python -m benchmarks.bench_app --redis-url unix:///path/to/redis.sock
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_data_app

NS, QUEUE = "bench-app", "q"
PAYLOAD = b"bench-job-payload-0123456789abcdef"  # benchmarks/bench.py's


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


Call = Callable[[], Awaitable[bytes]]


def http_scope(
    method: str, path: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]], **more: Any
) -> dict[str, Any]:
    """An HTTP request's ASGI scope, as an HTTP server makes it; `more` adds keys or replaces them."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": None,
        "server": None,
        **more,
    }


def caller(app: Any, method: str, path: str, query: bytes, body: bytes, expect: int) -> Call:
    """One request through the ASGI callable, as hypercorn would make it; it returns the answer's body."""
    headers = [(b"host", b"bench"), (b"content-length", str(len(body)).encode())]

    async def call() -> bytes:
        scope = http_scope(
            method, path, path.encode(), query, headers, client=("127.0.0.1", 1), server=("127.0.0.1", 7777)
        )
        status = 0
        answer = b""

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, answer
            if message["type"] == "http.response.start":
                status = message["status"]
            else:
                answer += message.get("body", b"")

        await app(scope, receive, send)
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status}, expected {expect}")
        return answer

    return call


def consume_and_ack(app: Any, query: bytes) -> Call:
    """bench.py's consume_ack pair: a count=1 consume (ttr 60), then the DELETE of the job it got."""
    consume = caller(app, "GET", f"/api/{NS}/{QUEUE}", query + b"&ttr=60", b"", 200)

    async def call() -> bytes:
        job_id = json.loads(await consume())["job_id"]
        return await caller(app, "DELETE", f"/api/{NS}/{QUEUE}/job/{job_id}", query, b"", 204)()

    return call


async def measure(call: Call, callers: int, requests: int) -> float:
    """CPU µs per request, `callers` tasks in parallel."""
    each = requests // callers

    async def loop() -> None:
        for _ in range(each):
            await call()

    cpu = cpu_seconds()
    await asyncio.gather(*(loop() for _ in range(callers)))
    return 1e6 * (cpu_seconds() - cpu) / (each * callers)


async def main(args: argparse.Namespace) -> None:
    runtime = await Runtime.start(Config(pools={"default": PoolConfig("default", url=args.redis_url)}), run_pumps=False)
    try:
        token = await runtime.tokens.create("default", NS, "bench_app")
        app = create_data_app(runtime)
        query = f"token={token}".encode()
        publish = caller(app, "PUT", f"/api/{NS}/{QUEUE}", query, PAYLOAD, 201)
        size = caller(app, "GET", f"/api/{NS}/{QUEUE}/size", b"", b"", 200)
        unknown = caller(app, "GET", "/nowhere", b"", b"", 404)
        pair = consume_and_ack(app, query)
        figures: dict[str, list[float]] = {
            "publish": [],
            "consume + ACK (per request)": [],
            "GET size (no token check)": [],
            "404 (no route)": [],
        }
        for _ in range(args.rounds):
            figures["publish"].append(await measure(publish, args.callers, args.requests))
            # The publishes above filled the queue: half as many pairs, two requests each.
            figures["consume + ACK (per request)"].append(await measure(pair, args.callers, args.requests // 2) / 2)
            figures["GET size (no token check)"].append(await measure(size, args.callers, args.requests))
            figures["404 (no route)"].append(await measure(unknown, args.callers, args.requests))
        print(f"data app, no HTTP server, {args.callers} concurrent callers, median of {args.rounds} rounds:")
        for name, runs in figures.items():
            print(f"  {name:<28} {statistics.median(runs):6.1f} µs CPU per request")
        await runtime.pools.get("default").purge_namespace(NS)
        await runtime.tokens.delete_namespace("default", NS)
    finally:
        await runtime.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--requests", type=int, default=32_000)
    parser.add_argument("--rounds", type=int, default=5)
    uvloop.run(main(parser.parse_args()))
