"""How long a request's body may take, and what an answer given before the body ended does to the connection.

hypercorn's `read_timeout` bounds each read, so a client sending one byte a second is never cut
off. `RequestBodyMiddleware` bounds the whole body instead: a request still waiting for its body
`body_timeout` seconds after its head arrived gets `BodyTimeout` (408) from that wait.

An answer that starts before the app has received the whole body (that 408, a 413, or an error
raised before the handler read the body) ends the connection: the server does not read what is
left of the body (up to 100 MB of a refused upload), so the connection cannot carry another
request, and the answer says `Connection: close` so that the client does not try.
"""

from __future__ import annotations

import asyncio

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lmstfy_py.errors import BodyTimeout

# How often the waiting bodies are checked: a deadline is enforced at most this late.
SWEEP_S = 0.25


class RequestBodyMiddleware:
    """Outermost, so that it sees every answer, errors rendered by RequestMiddleware included.

    Requests without a body pass straight through, at the cost of a look at their headers. The
    deadlines share one timer, a sweep a few times a second while any body is awaited: a timer
    per request (asyncio.timeout) cost a publish ~10 µs more.
    """

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout
        self._pending: set[_Body] = set()  # bodies not yet received whole
        self._sweep_timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        body = _Body(receive, send, loop.time() + self.timeout, self._pending)
        self._pending.add(body)
        if self._sweep_timer is None:
            self._sweep_timer = loop.call_later(SWEEP_S, self._sweep, loop)
        try:
            await self.app(scope, body.receive, body.send)
        finally:
            self._pending.discard(body)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for body in self._pending:
            if now >= body.deadline:
                body.expire()
        self._sweep_timer = loop.call_later(SWEEP_S, self._sweep, loop) if self._pending else None


def has_body(scope: Scope) -> bool:
    name: bytes
    value: bytes
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip().lstrip(b"0") != b""
        if name == b"transfer-encoding":
            return True
    return False


class _Body:
    """One request's body on its way in, and its answer on its way out."""

    __slots__ = ("_closing", "_expired", "_pending", "_receive", "_send", "_waiting", "deadline")

    def __init__(self, receive: Receive, send: Send, deadline: float, pending: set[_Body]) -> None:
        self._receive = receive
        self._send = send
        self.deadline = deadline
        self._pending = pending  # holds this body until the app has had its last message
        self._waiting: asyncio.Task[object] | None = None  # the app's task, while it waits for the body
        self._expired = False  # the sweep cancelled that wait
        self._closing = False  # the answer ends the connection

    def expire(self) -> None:
        """Past the deadline: the app's wait for the body, if it is waiting, ends in BodyTimeout.

        An app not waiting now is left alone: the body may be whole by the time it asks.
        """
        if self._waiting is not None and not self._expired:
            self._expired = True
            self._waiting.cancel()

    async def receive(self) -> Message:
        if self not in self._pending:
            return await self._receive()
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        self._waiting = task
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            # Ours, unless the task is being cancelled for another reason as well.
            if self._expired and task.uncancel() <= cancelling:
                raise BodyTimeout("body not received in time") from None
            raise
        finally:
            self._waiting = None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._pending.discard(self)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and self in self._pending:
            self._closing = True
            MutableHeaders(scope=message)["connection"] = "close"  # h11 then ends the connection after it
        if self._closing and message["type"] == "http.response.body" and not message.get("more_body", False):
            await self._send_last(message)
        else:
            await self._send(message)

    async def _send_last(self, message: Message) -> None:
        # Ending the response, hypercorn hands the app `http.disconnect` through the request's
        # queue and waits for room in it. The unread body may have filled that queue (10
        # chunks) and the app reads no more: without a reader the hand-over would wait for
        # ever, leaving the connection open and a graceful stop waiting its whole timeout.
        discard = asyncio.create_task(self._discard_until_disconnect())
        try:
            await self._send(message)
        finally:
            discard.cancel()

    async def _discard_until_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
