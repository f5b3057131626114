"""AsyncClient's requests: keep-alive HTTP/1.1 connections on asyncio's transports, their answers
parsed by httptools (llhttp, in C).

httpcore's pool and its pure-Python HTTP/1.1 state machine (h11) cost a worker's consume of 100
jobs about as much CPU as reading the 100 jobs (docs/PERFORMANCE.md, "The worker's consumes on
httptools"). An exchange here is one write and one wake-up: the protocol feeds what arrives to
the parser in the transport's callback, and resolves the request's future when the answer is
complete (Content-Length, chunked as Go lmstfy sends a consume of many, or until the close).
Failures are raised as httpcore's exceptions, so that retry.py reads them the one way for both
clients (connecting and waiting for a connection: never sent; anything after the first byte
written: maybe carried out). Event streams stay on httpcore's pool (aio.py).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from dataclasses import dataclass
from typing import cast

import certifi
import httpcore
import httptools

from lmstfy_py.client.asyncio_backend import readable
from lmstfy_py.client.calls import Answer

REQUEST_ID = b"x-request-id"


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float
    read: float
    write: float
    pool: float


class _Exchange(asyncio.Protocol):
    """One connection's bytes: an answer is parsed as it arrives and ends the waiting request."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[Answer] | None = None  # the request waiting for its answer
        self.body: list[bytes] = []
        self.request_id: str | None = None
        self.framed = False  # the answer says where its body ends (a length, or chunks)
        self.started = False  # a byte of the answer arrived
        self.headed = False  # its head was read whole
        self.complete = False
        self.keep_alive = False
        self.closed = False  # the peer closed, or anything arrived while no request waited
        self.paused = False
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        if self.answer is None or self.complete:
            self.closed = True  # unasked bytes: the server is closing it, or answered out of turn
            return
        self.started = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpcore.RemoteProtocolError(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake_writer()
        if self.answer is None or self.answer.done():
            return
        if self.headed and not self.framed:
            self.on_message_complete()  # a body that ends with the connection
        elif not self.started:
            self._fail(httpcore.RemoteProtocolError("the connection closed before any answer"))
        else:
            self._fail(httpcore.ReadError(str(exc) if exc else "the connection closed mid-answer"))

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_writer()

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == REQUEST_ID:
            self.request_id = value.decode("latin-1")
        elif lowered in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headed = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # known while the parser is on this answer
        answer = self.answer
        if answer is not None and not answer.done():
            status = self.parser.get_status_code()
            answer.set_result(Answer(status, b"".join(self.body), self.request_id))

    def begin(self, answer: asyncio.Future[Answer]) -> None:
        self.answer, self.body, self.request_id = answer, [], None
        self.framed = self.started = self.headed = self.complete = self.keep_alive = False

    def _fail(self, exc: Exception) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)
        if self.transport is not None:
            self.transport.close()

    def _wake_writer(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)


class Connection:
    """One keep-alive connection, one request at a time."""

    def __init__(self, transport: asyncio.Transport, exchange: _Exchange, loop: asyncio.AbstractEventLoop) -> None:
        self.transport, self.exchange, self.loop = transport, exchange, loop
        self.socket = transport.get_extra_info("socket")
        self.idle_since = loop.time()

    @property
    def reusable(self) -> bool:
        return not self.exchange.closed and not self.transport.is_closing()

    def closing(self) -> bool:
        """Idle, yet readable: the server is closing it, and the loop has not read that yet (a request
        written now would fail after sending; httpcore looks the same way before each reuse)."""
        return readable(self.socket)

    async def send(self, request: bytes, timeouts: Timeouts) -> Answer:
        exchange = self.exchange
        answer: asyncio.Future[Answer] = self.loop.create_future()
        exchange.begin(answer)
        try:
            self.transport.write(request)
            if exchange.paused:
                await self._drain(timeouts.write)
            timer = self.loop.call_later(timeouts.read, _expire, answer)
            try:
                got = await answer
            finally:
                timer.cancel()
        except BaseException:
            self.close()  # its state is unknown: an answer may still be on its way
            raise
        if not exchange.keep_alive:
            self.close()
        exchange.answer = None
        self.idle_since = self.loop.time()
        return got

    async def _drain(self, timeout: float) -> None:
        exchange = self.exchange
        while exchange.paused and not exchange.closed:
            exchange.drained = self.loop.create_future()
            try:
                async with asyncio.timeout(timeout):
                    await exchange.drained
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing the request") from None
        if exchange.closed:
            raise httpcore.WriteError("the connection closed while the request was written")

    def close(self) -> None:
        self.exchange.closed = True
        self.transport.close()


def _expire(answer: asyncio.Future[Answer]) -> None:
    if not answer.done():
        answer.set_exception(httpcore.ReadTimeout("timed out reading the answer"))


class Connections:
    """Up to `limit` connections to one server; idle ones are reused newest first and dropped after
    `keepalive_expiry` seconds (before the server's own keep-alive timeout closes them)."""

    def __init__(
        self,
        scheme: bytes,
        host: bytes,
        port: int | None,
        ssl_context: ssl.SSLContext | None,
        limit: int,
        keepalive_expiry: float,
    ) -> None:
        self.host = host.decode("ascii")
        self.tls = scheme == b"https"
        self.port = port or (443 if self.tls else 80)
        self.ssl_context = ssl_context
        self.limit, self.keepalive_expiry = limit, keepalive_expiry
        self.idle: list[Connection] = []
        self.busy: set[Connection] = set()
        self.in_use = 0  # requests holding or opening a connection
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def send(self, request: bytes, timeouts: Timeouts) -> Answer:
        if self.in_use >= self.limit:
            await self._wait_for_room(timeouts.pool)
        self.in_use += 1
        connection = None
        try:
            connection = self._idle() or await self._open(timeouts.connect)
            self.busy.add(connection)
            answer = await connection.send(request, timeouts)
            if connection.reusable:
                self.idle.append(connection)
            return answer
        finally:
            if connection is not None:
                self.busy.discard(connection)
            self.in_use -= 1
            wake_first(self.waiting)

    def _idle(self) -> Connection | None:
        oldest = asyncio.get_running_loop().time() - self.keepalive_expiry
        while self.idle:
            connection = self.idle.pop()
            if connection.reusable and connection.idle_since > oldest and not connection.closing():
                return connection
            connection.close()
        return None

    async def _wait_for_room(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Woken, a request may find the place taken by one that came meanwhile: it waits again.
        while self.in_use >= self.limit:
            room = loop.create_future()
            self.waiting.append(room)
            try:
                async with asyncio.timeout_at(deadline):
                    await room
            except TimeoutError:
                raise httpcore.PoolTimeout("timed out waiting for a free connection") from None
            except BaseException:
                if room.done() and not room.cancelled():
                    wake_first(self.waiting)  # woken, then cancelled: the place goes to the next
                raise
            finally:
                room.cancel()  # done already, or no longer wanted

    async def _open(self, timeout: float) -> Connection:
        loop = asyncio.get_running_loop()
        tls = (self.ssl_context or _default_context()) if self.tls else None
        try:
            async with asyncio.timeout(timeout):
                transport, exchange = await loop.create_connection(
                    _Exchange, self.host, self.port, ssl=tls, server_hostname=self.host if tls else None
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {self.host}:{self.port}") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return Connection(transport, exchange, loop)

    def close(self) -> None:
        """Closes every connection; a request still on one fails (AsyncClient.close, as httpcore's pool)."""
        for connection in [*self.idle, *self.busy]:
            connection.close()
        self.idle.clear()


_DEFAULT_CONTEXT: list[ssl.SSLContext] = []


def wake_first(waiting: deque[asyncio.Future[None]]) -> None:
    """Wakes the first of `waiting` still waiting, one at a time: each has room for one more thing
    to do (a request here; a fetcher or a handler slot in the worker, worker/run.py)."""
    while waiting:
        first = waiting.popleft()
        if not first.done():
            first.set_result(None)
            return


def _default_context() -> ssl.SSLContext:
    """httpcore's default trust, made once: certifi's certificate authorities."""
    if not _DEFAULT_CONTEXT:
        _DEFAULT_CONTEXT.append(ssl.create_default_context(cafile=certifi.where()))
    return _DEFAULT_CONTEXT[0]
