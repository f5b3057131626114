"""hypercorn's serve loop for one listening socket, adapted so that no request is lost when a
connection ends: at a graceful stop, and when a keep-alive connection times out.

hypercorn 0.18 (asyncio/run.py `worker_serve`, asyncio/tcp_server.py `TCPServer`) closes an idle
keep-alive connection when its keep_alive_timeout passes, and at once when the server stops. Both
closes race with a request arriving on the connection, and hypercorn loses such requests:

- The read loop goes on handling bytes it reads after the close began, and on Python 3.11
  `asyncio.wait_for` can swallow the cancel that a request's arrival sends to the idle timer
  (gh-86296), so the close goes ahead while the request runs. Either way the request is carried
  out (a publish stores its job) and its answer is written to a closed socket: measured, up to 35
  jobs stored but unanswered in one stop of 64 keep-alive publishers.
- At a stop, an idle connection is closed even when a request's bytes have arrived and wait to be
  read: the client gets a reset for a request sent before the stop.

And a request that is being served when the server stops gets its answer, then hypercorn closes
the connection without saying `Connection: close` in the answer, so the client sends its next
request into a closing socket. And its close after an answer (a refusal, an early answer) is
immediate: a client still sending is reset, and the reset destroys the answer it had not read.
Here such a close lingers (lingering.py) in the read loop, which drops what it reads meanwhile.

`serve` is worker_serve's loop (listen, hand each connection to a TCPServer, stop gracefully)
without lifespan events, which our apps do not use (server.py starts and stops the Runtime),
and with `_Connection`, a TCPServer that closes an idle connection only when no request has
arrived, and that handles nothing it reads once it decided to close. Its stop:

1. every answer from then on says `Connection: close` and ends its connection (hypercorn's own
   way of ending a connection at keep_alive_max_requests, with the maximum set to 0);
2. the connections the kernel has already queued are accepted, then the listening socket is
   closed: new connections are refused at once, instead of waiting in a queue nobody reads
   (hypercorn closed only its copy of the socket, ours stayed open until the process exited);
3. idle connections close, once the requests whose bytes have already arrived are read (then
   they are served like the others); busy ones close after their answer;
4. connections still open after graceful_timeout are cut off (logged, no traceback).

And two answers hypercorn gives before the app has answered change (`_H11Protocol`):

- a request h11 cannot parse (400) or whose head passes 16 KiB (431) gets a JSON error
  (refusals.py) instead of an empty body, like every other error;
- a chunked body whose chunk-size line announces more than the body's limit (1 MiB, counting what
  came before) is refused 413 as soon as that line is parsed: hypercorn would wait for the chunk's
  data (up to body_timeout, for a client that announces 2 GiB and then sends nothing).

This module leans on TCPServer's internals (`_read_data`, `_idle_timeout`, `protocol_send`) and
H11Protocol's (`_send_error_response`, `connection`), which is why it is one module, tested end to
end (tests/e2e/test_http_hardening.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from itertools import chain
from typing import Any

import h11
from h11._readers import ChunkedReader
from hypercorn.asyncio.tcp_server import MAX_RECV, TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.typing import AppWrapper, ASGIFramework, LifespanState
from hypercorn.utils import wrap_app

from lmstfy_py.lingering import Linger, half_close
from lmstfy_py.refusals import MAX_BODY, body_for
from lmstfy_py.socket_queues import POLL_S, UNREAD_WAIT_S, accept_queued, unread_bytes

log = logging.getLogger(__name__)


async def serve(app: ASGIFramework, config: Config, sock: socket.socket, shutdown: asyncio.Event) -> None:
    """Serve `app` on the listening `sock` until `shutdown` is set, then stop as the docstring says."""
    loop = asyncio.get_running_loop()
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")
    context = WorkerContext(None)
    connections: set[asyncio.Task[None]] = set()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        task.add_done_callback(connections.discard)
        # Cancelled only when cut off at the graceful timeout, which serve logs: ending quietly
        # spares asyncio's stream callback a traceback per connection.
        with contextlib.suppress(asyncio.CancelledError):
            await _Connection(wrapped, loop, config, context, {}, reader, writer).run()

    # The server owns `sock` from here: closing it at the stop is what refuses new connections.
    server = await asyncio.start_server(on_connection, sock=sock, backlog=config.backlog)
    try:
        await shutdown.wait()
    finally:
        config.keep_alive_max_requests = 0
        await accept_queued(sock)
        server.close()
        await context.terminated.set()
        await _wait_for(connections, config.graceful_timeout)


async def _wait_for(connections: set[asyncio.Task[None]], timeout: float) -> None:
    if not connections:
        return
    _, pending = await asyncio.wait(set(connections), timeout=timeout)
    if pending:
        log.warning("%d connection(s) still busy after %gs: cut off", len(pending), timeout)
        for task in pending:
            task.cancel()
        await asyncio.wait(pending)


class _Connection(TCPServer):
    """One client connection: hypercorn's, but an idle close never drops a request that arrived."""

    def __init__(
        self,
        app: AppWrapper,
        loop: asyncio.AbstractEventLoop,
        config: Config,
        context: WorkerContext,
        state: LifespanState,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        super().__init__(app, loop, config, context, state, reader, writer)
        self._serving = False  # from a request's head to the end of its answer
        self._closing = False  # set when an idle close is decided: nothing read after it is handled
        self._reading = False  # the read loop runs: a close can linger in it
        self._linger: Linger | None = None  # a close is lingering: what is read is dropped (lingering.py)

    async def protocol_send(self, event: Event) -> None:
        # h11 says "not idle" as soon as a request's head is parsed, before the app is started.
        if isinstance(event, Updated):
            self._serving = not event.idle
        await super().protocol_send(event)

    async def _read_data(self) -> None:
        _use_our_h11(self)
        # TCPServer's loop, but bytes read once an idle close was decided are not handled, nor those
        # read while a close lingers.
        self._reading = True
        while not self.reader.at_eof() and not self._closing:
            try:
                data = await asyncio.wait_for(self.reader.read(MAX_RECV), self.config.read_timeout)
            except OSError:  # ConnectionError, TimeoutError and SSLError are OSErrors too
                break
            if self._linger is not None:
                self._linger.read()
                continue
            if self._closing:
                break
            await self.protocol.handle(RawData(data))
        self._reading = False
        await self.protocol.handle(Closed())

    async def _close(self) -> None:
        # A close while the client may still be sending lingers in the read loop; the idle close has
        # made sure nothing came, and a close once the loop has ended has nothing left to read.
        if self._reading and not self._closing:
            if self._linger is not None:  # a close told twice: the first one's linger ends it
                return
            transport = self.writer.transport
            if half_close(transport):
                self._linger = Linger(transport, self.loop)
                return
        if self._linger is not None:
            self._linger.cancel()
        await super()._close()

    async def _idle_timeout(self) -> None:
        # Cancelled (by TCPServer.protocol_send) when a request's head arrives.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.keep_alive_timeout):
                await self.context.terminated.wait()
        # One turn first: a read loop woken in the same turn as this task handles its bytes.
        await asyncio.sleep(0)
        deadline = asyncio.get_running_loop().time() + UNREAD_WAIT_S
        while unread_bytes(self.writer.get_extra_info("socket")) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(POLL_S)
        # A request's arrival cancels this task; never closing under a request must not rest on
        # that cancel alone (hypercorn's wait_for lost it).
        if self._serving:
            return
        self._closing = True
        await self._initiate_server_close()


def _use_our_h11(connection: TCPServer) -> None:
    """Puts an _H11Protocol in place of the H11Protocol that TCPServer.run has just made (and initiated,
    which does nothing), before any byte is read: run builds the protocol inline, with no hook."""
    wrapper = connection.protocol
    if type(wrapper.protocol) is H11Protocol:
        wrapper.protocol = _H11Protocol(
            wrapper.app,
            wrapper.config,
            wrapper.context,
            wrapper.task_group,
            wrapper.state,
            wrapper.ssl,
            wrapper.client,
            wrapper.server,
            wrapper.send,
        )


class _H11Protocol(H11Protocol):
    """hypercorn's HTTP/1.1, with JSON refusals and a chunked body's size checked on each chunk's size line."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.connection = _BoundedBody(h11.SERVER, max_incomplete_event_size=self.config.h11_max_incomplete_size)

    async def _send_error_response(self, status_code: int) -> None:
        # hypercorn's, with a body: called when h11 refuses what it received, before any answer began.
        body = body_for(status_code)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"connection", b"close"),
        ]
        await self._send_h11_event(
            h11.Response(status_code=status_code, headers=list(chain(headers, self.config.response_headers("h11"))))
        )
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())


class _BoundedBody(h11.Connection):
    """h11's server side, refusing (413) a chunked body whose chunks announce more than MAX_BODY in all.

    h11 reads a chunk's size line, then hands out the chunk's data as it arrives; its events say
    where a chunk starts and ends but not how long it is, and a size line with no data yet gives no
    event at all. So this looks at the chunk reader's count of bytes still to come in the chunk
    (`ChunkedReader._bytes_in_chunk` in h11 0.16): private, but the only place that number
    is, and a change there fails the tests (tests/e2e/test_http_hardening.py) rather than passing
    silently. The refusal is a RemoteProtocolError with a 413 hint, which hypercorn answers as
    it answers h11's own (`_send_error_response`, then the connection closes).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._body_bytes = 0  # of the current request, handed out so far

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        event = super().next_event()
        if isinstance(event, h11.Data):
            self._body_bytes += len(event.data)
        elif isinstance(event, h11.Request):
            self._body_bytes = 0
        reader = self._reader
        if isinstance(reader, ChunkedReader) and self._body_bytes + reader._bytes_in_chunk > MAX_BODY:
            # As h11 does for its own errors: the peer's state becomes ERROR, so the app's answer,
            # if it comes later, is dropped by hypercorn instead of raising.
            self._process_error(self.their_role)
            raise h11.RemoteProtocolError("body too large", error_status_hint=413)
        return event
