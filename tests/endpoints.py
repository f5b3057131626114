"""Real HTTP endpoints for push tests: an aiohttp server on a free loopback port that records every
POST it gets (time, headers, JSON body) and answers as its path says:

- /ok: 200 at once
- /fail/N: 500 to the first N POSTs of each job id, then 200
- /status/CODE: CODE, always
- /slow/SECONDS: answers 200 after SECONDS (past a pusher's timeout)

`refused_url()` is an address where nothing listens (a connection is refused).
Usable from a test's event loop (`async with Endpoints() as ep`) or from its own thread for
synchronous tests and benchmarks (`with Endpoints.in_thread() as ep`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from tests.servers import free_port

T = TypeVar("T")


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic()
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def job(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.raw)
        return found


class Endpoints:
    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[Received] = []
        self.tries: Counter[str] = Counter()
        self._runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def job_ids(self, path_prefix: str = "") -> list[str]:
        return [r.job["id"] for r in self.received if r.path.startswith(path_prefix)]

    async def _answer(self, request: web.Request) -> web.Response:
        raw = await request.read()
        got = Received(time.monotonic(), request.path, dict(request.headers), raw)
        self.received.append(got)
        kind, _, arg = request.path.strip("/").partition("/")
        if kind == "fail":
            self.tries[got.job["id"]] += 1
            return web.Response(status=500 if self.tries[got.job["id"]] <= int(arg) else 200)
        if kind == "status":
            return web.Response(status=int(arg))
        if kind == "slow":
            await asyncio.sleep(float(arg))
        return web.Response(text="ok")

    async def __aenter__(self) -> Endpoints:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @classmethod
    @contextmanager
    def in_thread(cls) -> Iterator[Endpoints]:
        """Served by an event loop of its own in a thread, for code that blocks its own loop."""
        endpoints = cls()
        with served_in_thread(endpoints.__aenter__, endpoints.__aexit__) as served:
            yield served


@contextmanager
def served_in_thread(start: Callable[[], Awaitable[T]], stop: Callable[[], Awaitable[object]]) -> Iterator[T]:
    """`start()` on an event loop of its own in a thread, which then runs until the block ends and
    `stop()` has run: a server for code that blocks its own loop (or has none)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    started: list[T] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        started.append(loop.run_until_complete(start()))
        ready.set()
        loop.run_forever()
        loop.run_until_complete(stop())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield started[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def refused_url() -> str:
    """A loopback address where nothing listens (a port that was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}/nobody"
