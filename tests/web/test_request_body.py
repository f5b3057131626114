"""The body deadline inside one process, driven through the ASGI interface as hypercorn drives it.

tests/e2e/test_http_hardening.py shows it on a real server over sockets; here the timing of the
body's messages is controlled exactly, to pin what the deadline does and does not cut.
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message

from lmstfy_py.runtime import Runtime
from lmstfy_py.web.middleware import SWEEP_S, build_app, route

DEADLINE_S = 0.3


async def echo(request: Request) -> Response:
    await asyncio.sleep(float(request.query_params.get("think", "0")))
    return Response(await request.body())


def app() -> ASGIApp:
    return build_app(cast(Runtime, None), [route("/echo", "PUT", echo)], body_timeout=DEADLINE_S)  # needs no runtime


class Exchange:
    """One request: its body messages are fed by the test, its answer's messages collected."""

    def __init__(self, query: str = "") -> None:
        self.body: asyncio.Queue[Message] = asyncio.Queue()
        self.sent: list[Message] = []
        self.scope = {
            "type": "http",
            "method": "PUT",
            "path": "/echo",
            "raw_path": b"/echo",
            "query_string": query.encode(),
            "headers": [(b"host", b"test"), (b"transfer-encoding", b"chunked")],
            "http_version": "1.1",
            "scheme": "http",
            "root_path": "",
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }

    def feed(self, data: bytes, more: bool) -> None:
        self.body.put_nowait({"type": "http.request", "body": data, "more_body": more})

    async def run(self, asgi: ASGIApp) -> None:
        async def send(message: Message) -> None:
            self.sent.append(message)

        await asgi(self.scope, self.body.get, send)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def content(self) -> bytes:
        return b"".join(message.get("body", b"") for message in self.sent[1:])


async def test_a_body_still_incomplete_at_the_deadline_is_answered_408() -> None:
    exchange = Exchange()
    exchange.feed(b"part", more=True)  # and nothing more
    started = time.monotonic()
    await asyncio.wait_for(exchange.run(app()), 5)
    elapsed = time.monotonic() - started
    assert (exchange.status, exchange.content) == (408, b'{"error":"body not received in time"}')
    assert exchange.headers[b"connection"] == b"close"
    assert DEADLINE_S <= elapsed <= DEADLINE_S + SWEEP_S + 0.2


async def test_a_body_complete_before_the_deadline_is_served_and_keeps_the_connection() -> None:
    exchange = Exchange()
    exchange.feed(b"one ", more=True)
    asyncio.get_running_loop().call_later(DEADLINE_S / 2, exchange.feed, b"two", False)
    await asyncio.wait_for(exchange.run(app()), 5)
    assert (exchange.status, exchange.content) == (200, b"one two")
    assert b"connection" not in exchange.headers


async def test_a_body_that_arrived_in_time_is_read_even_after_the_deadline() -> None:
    # The handler was busy (a slow Redis, say) past the deadline: the body waited for it, whole.
    exchange = Exchange(query=f"think={DEADLINE_S + 2 * SWEEP_S}")
    exchange.feed(b"whole", more=False)
    await asyncio.wait_for(exchange.run(app()), 5)
    assert (exchange.status, exchange.content) == (200, b"whole")


async def test_a_cancel_from_elsewhere_is_not_turned_into_a_408() -> None:
    exchange = Exchange()
    exchange.feed(b"part", more=True)
    task = asyncio.create_task(exchange.run(app()))
    await asyncio.sleep(DEADLINE_S / 2)
    task.cancel()  # the server cutting the connection off, say
    with pytest.raises(asyncio.CancelledError):
        await task
    assert exchange.sent == []
