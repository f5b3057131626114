#!/usr/bin/env python3
"""A trivial HTTP endpoint served exactly as `lmstfy-py serve` serves its apps: the bench's ceiling.

Every request gets 200 `{"msg":"ok"}`, once its body (if any) is read. The serving stack is
lmstfy_py.server's own: the same listening sockets (lmstfy_py.listeners: one per worker on
Linux, backlog, TCP_NODELAY), the same serve loop and settings of the chosen `--http-server`
(`server.serve_app`: lmstfy_py/hypercorn_serve.py with `hypercorn_config`, or
lmstfy_py/uvicorn_serve.py with `uvicorn_config`: access log off, graceful timeout, keep-alive
timeout), the same event loop (uvloop when installed), the same GC tuning, and `--workers`
processes forked after the address is reserved.
So "lmstfy-py req/s ÷ this req/s" is what lmstfy-py's own work (routing, auth, Redis) costs.

`--app raw` is a bare ASGI callable (the ceiling of hypercorn itself); `--app starlette` is a
Starlette app with one route and no middleware (what the framework alone costs); `--app redis`
is the bare callable plus one EVALSHA round trip per request (a script that returns 1) through
the client lmstfy-py's engine makes its script calls with on `--redis-url` (the auto-pipelining
one of a standalone pool): the ceiling of any route that makes one Redis call, which every job
route does. `--app redis-py` makes the same call through redis-py's pooled client, what
Sentinel and Cluster pools use (and standalone pools did before store/pipelined.py).

    .venv/bin/python -m benchmarks.trivial_app --port 7790 --workers 2 [--http-server uvicorn]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from typing import Any, cast

from hypercorn.typing import ASGIFramework
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from benchmarks.bench_http_servers import BODY, Receive, Send, raw_app
from lmstfy_py import listeners, server
from lmstfy_py.config import HTTP_SERVERS, HttpServer, PoolConfig, ServerConfig
from lmstfy_py.store import pools
from lmstfy_py.store.embedded import parent_death_hook
from lmstfy_py.store.scripts import Script


def redis_app(url: str, through_redis_py: bool = False) -> ASGIFramework:
    """raw_app after one EVALSHA through the client lmstfy-py's engine would use for `url`."""
    config = PoolConfig("default", url=url)
    requests, blocking = pools.connect(config)
    client = requests if through_redis_py else (pools.script_client(config) or requests)
    script = Script("one", "return 1")

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await script(client, [], [])
        await raw_app(scope, receive, send)

    del blocking  # lmstfy-py's long-poll client; no connection is opened until it is used
    return cast(ASGIFramework, app)


async def ok(request: Request) -> Response:
    return Response(BODY, media_type="application/json")


def starlette_app() -> Starlette:
    return Starlette(routes=[Route("/{path:path}", ok, methods=["GET", "PUT", "POST", "DELETE"])])


async def serve_until_stopped(app: ASGIFramework, sock: socket.socket, http_server: HttpServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server._tune_gc()  # same collector settings as a lmstfy-py worker
    await server.serve_app(cast(ASGIApp, app), ServerConfig(http_server=http_server), sock, stop)


def app_of(kind: str, redis_url: str) -> ASGIFramework:
    if kind.startswith("redis"):
        return redis_app(redis_url, through_redis_py=kind == "redis-py")
    return cast(ASGIFramework, raw_app if kind == "raw" else starlette_app())


def run_worker(kind: str, sock: socket.socket, redis_url: str = "", http_server: HttpServer = "hypercorn") -> None:
    app = app_of(kind, redis_url)
    with asyncio.Runner(loop_factory=server._loop_factory()) as runner:
        runner.run(serve_until_stopped(app, sock, http_server))


def fork_worker(kind: str, sock: socket.socket, redis_url: str, http_server: HttpServer) -> int:
    die_with_parent = parent_death_hook()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        if die_with_parent is not None:
            die_with_parent()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
        run_worker(kind, listeners.listening(sock), redis_url, http_server)
        code = 0
    finally:
        os._exit(code)


def supervise(kind: str, sock: socket.socket, workers: int, redis_url: str, http_server: HttpServer) -> None:
    """Fork the workers, wait for SIGTERM/SIGINT, pass it on, reap them."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    pids = [fork_worker(kind, sock, redis_url, http_server) for _ in range(workers)]
    where = f"{listeners.url_of(sock)} ({http_server})"
    print(f"trivial_app: {kind} on {where}, {workers} workers", file=sys.stderr, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--app", choices=["raw", "starlette", "redis", "redis-py"], default="raw")
    parser.add_argument("--redis-url", default="", help="for --app redis: the Redis to call")
    parser.add_argument("--http-server", choices=HTTP_SERVERS, default="hypercorn")
    args = parser.parse_args()
    if args.app.startswith("redis") and not args.redis_url:
        parser.error(f"--app {args.app} needs --redis-url")
    if args.workers == 1 or not listeners.SHARES_PORTS:
        sock = listeners.listen(args.host, args.port, "trivial endpoint")
    else:
        sock = listeners.reserve(args.host, args.port, "trivial endpoint")
    if args.workers == 1:
        where = f"{listeners.url_of(sock)} ({args.http_server})"
        print(f"trivial_app: {args.app} on {where}, 1 worker", file=sys.stderr, flush=True)
        run_worker(args.app, sock, args.redis_url, args.http_server)
    else:
        supervise(args.app, sock, args.workers, args.redis_url, args.http_server)


if __name__ == "__main__":
    main()
