"""uvicorn (httptools' C parser) serving one listening socket with hypercorn_serve.py's guarantees:
`lmstfy-py serve --http-server uvicorn`, the faster HTTP path (docs/PERFORMANCE.md).

uvicorn 0.54's own behaviour differs from what lmstfy-py promises (docs/API.md, Connections) in
these ways, each changed here:

- Its keep-alive timer runs only between requests, and any byte received stops it: a connection
  that never sends a request, or sends half a head, is held for ever. Here a connection waiting
  for a request's head is closed `keep_alive_timeout` after it began to wait, head complete or not
  (looked at by one sweep of the server's connections every `_HEAD_SWEEP_S`, not a timer each).
- Its idle close, and its close of idle connections at a stop, reset a request whose bytes had
  arrived but were not read yet. Here, as in hypercorn_serve.py, a connection is closed only when
  no request is being served and the kernel holds no unread bytes for it (waited for up to 1 s).
- At a stop it closes the listening socket first, resetting connections the kernel had queued
  with their requests. Here those are accepted and served first (socket_queues.accept_queued).
- A request whose head arrives after the stop began is answered with keep-alive (then closed
  without notice), and so is one being answered when the stop begins with another pipelined
  behind it. Here every answer from the stop on says `Connection: close`.
- httptools buffers a request head of any size. Here a head over 16 KiB (h11's limit under
  hypercorn) is answered 431, and a head httptools cannot parse gets a JSON 400 instead of
  uvicorn's plain-text one; both close the connection.
- Its closes after an answer (a refusal, an early answer, `Connection: close`) are immediate: a
  client still sending is reset, and the reset destroys the answer it had not read. Here every
  close of a connection lingers (lingering.py's transport, given to both protocols).
- A chunk's size line announcing more than a body may hold makes uvicorn wait for the chunk's
  data (up to body_timeout, for a client that announces 2 GiB and then sends nothing). Here the
  body is refused 413 as soon as that line is parsed (`_follow_chunks`), as under hypercorn.

Two more, for speed (issue 27). A connection to the data port begins with uvicorn_plain.py's
protocol, which reads and answers the plain requests of the hot data routes itself and hands the
connection to `_Connection` (uvicorn's, with the changes above; `take_over`) at the first request
that is anything else. On a connection handed over, a hot route's request whose body came whole with
its head is still answered without the ASGI cycle (uvicorn_hot.py, the class `_Connection` extends).
What both classes keep alike (the head deadline, the careful close, the answer's bytes) is in
uvicorn_connection.py.

What stays uvicorn's, once a connection is handed over: parsing, the request/response cycle of every
other request, flow control, pipelining, `Expect: 100-continue`. Its Server is used for start-up
(`startup` with our socket), the Date header (its tick loop) and nothing else: no signal handlers
(server.py owns them), no lifespan (the apps do not use one), no logging configuration (logs.py owns
it), no proxy-header rewriting (hypercorn does none either), no access log (web/accesslog.py has
one). This module leans on HttpToolsProtocol's internals (`cycle`, `pipeline`, `parser` callbacks,
`send_400_response`), which is why the uvicorn version is pinned in pyproject.toml and every suite
about connections runs under both servers (tests/conftest.py, `http_server`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.server import ServerState

from lmstfy_py import tasks
from lmstfy_py.config import ServerConfig
from lmstfy_py.lingering import LingeringTransport
from lmstfy_py.listeners import BACKLOG
from lmstfy_py.refusals import BAD_REQUEST, BODY_TOO_LARGE, HEAD_TOO_LARGE, MAX_BODY, MAX_HEAD_BYTES
from lmstfy_py.socket_queues import UNREAD_WAIT_S, accept_queued
from lmstfy_py.uvicorn_connection import IdleClose, StoppingState, refusal_bytes
from lmstfy_py.uvicorn_hot import HotAnswers
from lmstfy_py.uvicorn_plain import PlainRequests
from lmstfy_py.web.hot import HotRoutes

log = logging.getLogger(__name__)

# A chunk's size line, as llhttp accepts it (no spaces; leading zeros, then at most 64 bits).
_SIZE_LINE = re.compile(rb"0*([0-9A-Fa-f]{1,16})[;\r]")
_ZEROS = re.compile(rb"0*")
_LINE_START = 32  # bytes kept of a line a read ended in: a size line's digits and what ends them
_WAIT_S = 0.05  # how often the stop looks whether every connection is gone
_CANCEL_WAIT_S = 1.0  # for the requests cut off to end (server.py's own fallback comes after STOP_MARGIN)
_DATE_EVERY_S = 1.0  # the Date header's refresh, as uvicorn's own main loop does it
# How often the connections waiting for a head are looked at: a head deadline is enforced at most this
# late. A timer per connection, set at every answer and cancelled at the next head, cost a request
# two call_later+cancel pairs (~5.5 µs of a ~250 µs request; uvicorn's own keep-alive timer was the second).
_HEAD_SWEEP_S = 0.25


async def serve(config: uvicorn.Config, sock: socket.socket, shutdown: asyncio.Event) -> None:
    """Serve `config`'s app on the listening `sock` until `shutdown` is set, then stop gracefully (for
    config.timeout_graceful_shutdown seconds at most) as hypercorn_serve.serve does."""
    config.load()
    runner = _Server(config)
    runner.lifespan = config.lifespan_class(config)
    # The server owns `sock` from here: closing it at the stop is what refuses new connections.
    await runner.startup(sockets=[sock])
    # uvicorn's main_loop, under our supervised loop: it only refreshes the Date header here.
    ticking = tasks.Loop("uvicorn-date-header", _date_header(runner))
    sweeping = tasks.Loop("uvicorn-head-deadlines", _head_deadlines(runner.server_state))
    ticking.start()
    sweeping.start()
    try:
        await shutdown.wait()
    finally:
        runner.should_exit = True
        await _stop(runner, sock, config.timeout_graceful_shutdown or 0)
        await sweeping.stop()
        await ticking.stop()


def _date_header(runner: uvicorn.Server) -> tasks.Step:
    async def refresh() -> float:
        await runner.on_tick(0)  # tick 0 of uvicorn's ten a second: the one that sets the Date header
        return _DATE_EVERY_S

    return refresh


def _head_deadlines(state: ServerState) -> tasks.Step:
    async def sweep() -> float:
        now = asyncio.get_running_loop().time()
        for connection in list(state.connections):
            if isinstance(connection, IdleClose):
                connection.check_head_deadline(now)
        return _HEAD_SWEEP_S

    return sweep


def uvicorn_config(app: ASGIApp, server: ServerConfig, graceful_timeout: int) -> uvicorn.Config:
    """One server's uvicorn settings: ours wherever they are uvicorn's to apply."""
    # Its warnings are about clients (each malformed request, each upgrade asked for): not the log's business.
    logging.getLogger("uvicorn.error").setLevel(logging.ERROR)
    return uvicorn.Config(
        app,
        # A connection to the data app begins plain (uvicorn_plain.py); the admin app has no hot routes.
        http=_Plain if isinstance(app, HotRoutes) else _Connection,
        loop="none",  # server.py made the loop
        lifespan="off",
        ws="none",
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        backlog=BACKLOG,
        timeout_keep_alive=server.keep_alive_timeout,
        timeout_graceful_shutdown=graceful_timeout,
    )


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.server_state = StoppingState()


async def _stop(runner: _Server, sock: socket.socket, graceful_timeout: float) -> None:
    state = runner.server_state
    assert isinstance(state, StoppingState)
    state.stopping = True
    for connection in list(state.connections):
        connection.shutdown()
    await accept_queued(sock)
    for listening in runner.servers:
        listening.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + graceful_timeout
    while (state.connections or state.tasks) and loop.time() < deadline:
        await asyncio.sleep(_WAIT_S)
    if state.connections or state.tasks:
        log.warning("%d connection(s) still busy after %gs: cut off", len(state.connections), graceful_timeout)
        _cut_off(state)
        if state.tasks:
            await asyncio.wait(set(state.tasks), timeout=_CANCEL_WAIT_S)


def _cut_off(state: ServerState) -> None:
    for connection in list(state.connections):
        if isinstance(connection, IdleClose):
            connection.transport.abort()
    for task in state.tasks:
        task.cancel()


class _Connection(HotAnswers, IdleClose):
    """One client connection: uvicorn's, with the head deadline, the careful idle close and the stop of
    the module docstring."""

    def __init__(
        self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any], **more: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **more)
        self._head_since: float | None = None  # loop time since when a request's head is awaited
        self._idle_poll: asyncio.TimerHandle | None = None  # the next look for unread bytes before a close
        self._in_head = False  # from a message's first byte to the end of its head
        self._head_bytes = 0
        self._messages = 0  # begun on this connection: whether a read began one
        # The request being answered: not always self.cycle, which is the last one parsed (a client
        # may pipeline its next request behind it).
        self._answering_cycle: RequestResponseCycle | None = None
        self._body_bytes = 0  # of the current request, received so far
        self._chunked = False  # from the end of a chunked request's head to the end of its body
        self._chunk_at: int | None = None  # _body_bytes when a chunk's size line was parsed in this read
        self._line_start = b""  # while _chunked: how the line the last read ended in begins (zeros dropped)

    def _serving(self) -> bool:
        """From a request's head to the end of its answer (pipelined requests included)."""
        return (self.cycle is not None and not self.cycle.response_complete) or bool(self.pipeline)

    # -- connection events ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # Every close of the connection lingers, uvicorn's own included (lingering.py).
        super().connection_made(LingeringTransport(transport, self.loop))
        if self._stopping:
            self.shutdown()
        else:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_wait()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        was_in_head, messages = self._in_head, self._messages
        super().data_received(data)
        # Counted only for reads that began and ended inside one head: at most one read (256 KiB,
        # uvloop's) of a head escapes the count, which keeps the bound without knowing where in a
        # read a pipelined request's head began. A read that ended one head, and its body, and began
        # the next is not inside one head: counted, it refused the next for the body's bytes.
        if was_in_head and self._in_head and self._messages == messages and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(431, HEAD_TOO_LARGE)
        if self._chunked and not self.transport.is_closing():
            self._follow_chunks(data)

    def _follow_chunks(self, data: bytes) -> None:
        """Refuses (413) a chunked body once a chunk's size line says it will pass MAX_BODY.

        httptools calls on_chunk_header without the size (llhttp has it, httptools does not
        expose it), so the line is found in the bytes: llhttp takes every byte it is fed, and
        after a chunk's size line comes only that chunk's data, so a chunk still open at the end
        of a read had its size line end where the data handed to on_body since began. A line
        begun in an earlier read (a client sending it in pieces) starts with `_line_start`.
        """
        if self._chunk_at is not None:
            end = len(data) - (self._body_bytes - self._chunk_at)
            size = _chunk_size(self._line_start, data, end)
            if size is not None and self._chunk_at + size > MAX_BODY and not self._answering():
                self._refuse(413, BODY_TOO_LARGE)
                return
            self._chunk_at = None
        tail = data.rfind(b"\n") + 1
        if tail == 0 and self._line_start:
            if len(self._line_start) < _LINE_START:
                self._line_start = (self._line_start + data[:_LINE_START])[:_LINE_START]
        else:
            zeros = _ZEROS.match(data, tail)
            begins = zeros.end() if zeros else tail
            self._line_start = data[begins : begins + _LINE_START]

    def _answering(self) -> bool:
        """The app has begun its answer (one given before the body ended, which closes the connection)."""
        return self.cycle is None or self.cycle.response_started

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, BAD_REQUEST)

    def _refuse(self, status: int, body: bytes) -> None:
        """Answers `status` with a JSON `body` and closes the connection (no request reached the app)."""
        self._stop_head_wait()
        self.transport.write(refusal_bytes(self.server_state.default_headers, status, body))
        self.transport.close()

    # -- parser callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes = True, 0
        self._messages += 1
        self._body_bytes, self._chunked, self._chunk_at, self._line_start = 0, False, None, b""

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_head_wait()
        # A body with Transfer-Encoding comes in chunks: llhttp refuses a request whose last coding is another.
        self._chunked = any(name == b"transfer-encoding" for name, _ in self.headers)
        super().on_headers_complete()
        if self._stopping and self.cycle is not None:
            self.cycle.keep_alive = False  # its answer says Connection: close and ends the connection

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_chunk_header(self) -> None:
        self._chunk_at = self._body_bytes

    def on_chunk_complete(self) -> None:
        self._chunk_at = None

    def on_message_complete(self) -> None:
        self._chunked, self._chunk_at = False, None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, without arming its keep-alive timer (any byte received would stop it): the head
        # deadline runs instead.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._await_head()

    # -- closing ---------------------------------------------------------------------------------

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self._answering_cycle = cycle
        super()._start_asgi_task(cycle, app)

    def shutdown(self) -> None:
        """The server is stopping: a busy connection ends after its answer, an idle one now (once the
        requests whose bytes have arrived are read: then they are served like the others). A request
        pipelined behind the one being answered is not handled, as under hypercorn: that answer says
        `Connection: close`, and a client resends what was not answered (RFC 9112, 9.3.2)."""
        if self._serving():
            for cycle in (self._answering_cycle, self.cycle, *(queued for queued, _ in self.pipeline)):
                if cycle is not None:
                    cycle.keep_alive = False
            return
        self._stop_head_wait()
        self._close_when_idle(asyncio.get_running_loop().time() + UNREAD_WAIT_S)

    def take_over(self, transport: asyncio.Transport, data: bytes, write_paused: bool) -> None:
        """Serves a connection from uvicorn_plain.py's protocol on, beginning with `data`, the bytes it
        had read and not answered (from a request's first byte)."""
        HotAnswers.connection_made(self, transport)
        if write_paused:  # the transport said so to the protocol before, and says resume to this one
            self.pause_writing()
        self.data_received(data)
        if self._stopping:
            self.shutdown()
        elif not self._serving():
            self._await_head()


class _Plain(PlainRequests):
    """How a connection starts (uvicorn_plain.py): its first request that is not plain hands it to _Connection."""

    successor = _Connection


def _chunk_size(line_start: bytes, data: bytes, end: int) -> int | None:
    """The size on the chunk-size line that ends at `end` in `data` (begun with `line_start` if it began
    in an earlier read), or None if no size line ends there: after the last chunk's size line (0) come
    trailer lines, which never read as one (a header line has a colon where a size line ends)."""
    if end < 1 or data[end - 1] != ord("\n"):
        return None
    start = data.rfind(b"\n", 0, end - 1) + 1
    if start == 0 and line_start:
        found = _SIZE_LINE.match(line_start + data[: min(end, _LINE_START)])
    else:
        found = _SIZE_LINE.match(data, start, end)
    return int(found[1], 16) if found else None
