"""The protocol a `--http-server uvicorn` connection starts with (issue 27): the plain requests of
the four hot data routes (web/hot.py) are read and answered here, with no uvicorn in between; at
the first request that is anything else, the connection is handed, with the bytes it has not
answered, to uvicorn_serve.py's connection (uvicorn's, with our changes) for the rest of its life.

Plain, here, is a strict subset of HTTP/1.1 that a careful reader cannot mistake: the request line
`GET|PUT|DELETE /target HTTP/1.1`, header fields that are a token, a colon and visible characters
(no folding, no leading empty line), at most one all-digit Content-Length, no Transfer-Encoding,
Expect or Upgrade, and a body of at most 64 KiB in within _BODY_WAIT_S of the head. Everything else
(an HTTP/1.0 request, a chunked or slow body, `Expect: 100-continue`, a malformed head, any other
route) goes to uvicorn, which answers it as it always did, 400s included: this module never
decides what is wrong with a request, only that a request is plain. A head still incomplete past
MAX_HEAD_BYTES is refused 431 here, as there.

What a plain request saves is uvicorn's per-request machinery: the parser's callbacks, the
RequestResponseCycle and its FlowControl, the pipeline bookkeeping. The answer is HotRoutes.respond's,
written as uvicorn_hot.py writes it, so a client cannot tell the ways apart
(tests/e2e/test_whole_requests.py); docs/PERFORMANCE.md has what it saves. The server's promises hold
here as there (uvicorn_connection.py): the head deadline, the careful idle close, every answer from
a stop on saying `Connection: close`, pipelined requests answered in order (their bytes wait here;
past _HIGH_WATER, reading pauses), and a client not reading its answers holding the next back.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, cast

import httptools
import uvicorn
from starlette.types import Message, Scope
from uvicorn.protocols.http.httptools_impl import STATUS_LINE
from uvicorn.protocols.utils import get_local_addr, get_remote_addr, is_ssl
from uvicorn.server import ServerState

from lmstfy_py.lingering import LingeringTransport
from lmstfy_py.refusals import HEAD_TOO_LARGE, MAX_HEAD_BYTES
from lmstfy_py.socket_queues import UNREAD_WAIT_S
from lmstfy_py.uvicorn_connection import CLOSE, IdleClose, answer_bytes, refusal_bytes
from lmstfy_py.uvicorn_hot import ANSWER_500
from lmstfy_py.web.hot import Answer, HotRoutes
from lmstfy_py.web.middleware import has_body

log = logging.getLogger(__name__)

_METHODS = (b"GET", b"PUT", b"DELETE")  # the hot routes' (web/hot.py)
_LINE = rb"(" + b"|".join(_METHODS) + rb") (/[\x21-\x7e]*) HTTP/1\.1\r\n"  # the request line
_HEAD = re.compile(_LINE + rb"((?:[-!#$%&'*+.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*\r\n)*)\r\n")
# A field's value as httptools hands it to uvicorn: without its leading whitespace, with its trailing.
_FIELD = re.compile(rb"([^:]+):[\t ]*(.*)\r\n")
# Proxy-Connection: llhttp reads it as Connection, h11 not at all; such a request is uvicorn's.
_NOT_PLAIN = frozenset({b"transfer-encoding", b"expect", b"upgrade", b"proxy-connection"})
# How a plain request may begin, before its first line is whole (anything else is uvicorn's at once:
# it answers a malformed request as soon as httptools sees its first wrong byte).
_STARTS = tuple(method + b" /" for method in _METHODS)
_REQUEST_LINE = re.compile(_LINE)
_HIGH_WATER = 65536  # bytes of pipelined requests held before reading pauses (uvicorn's HIGH_WATER_LIMIT)
# How long a plain request's body that did not come with its head is waited for here; then uvicorn's
# cycle takes it, under the body deadline (a client writing head and body apart sends both at once).
_BODY_WAIT_S = 0.1
# A plain hot request: its scope, where its head and its body end in the buffer, keep-alive.
Request = tuple[Scope, int, int, bool]


class TakesOver(Protocol):
    def take_over(self, transport: asyncio.Transport, data: bytes, write_paused: bool) -> None: ...


class PlainRequests(asyncio.Protocol, IdleClose):
    """One client connection while its requests are plain (see the module's docstring)."""

    successor: ClassVar[Callable[..., TakesOver]]  # the protocol it is handed to (uvicorn_serve.py)

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config, self.server_state, self.app_state = config, server_state, app_state
        self.loop = _loop or asyncio.get_running_loop()
        self.timeout_keep_alive = config.timeout_keep_alive
        assert isinstance(config.loaded_app, HotRoutes)  # uvicorn_serve.py's uvicorn_config chooses so
        self._hot: HotRoutes = config.loaded_app
        self._asgi = {"version": config.asgi_version, "spec_version": "2.3"}
        self._head_since = None
        self._idle_poll = None
        self._buffer: bytes | bytearray = b""  # read, not answered yet: from a request's first byte
        # Of a head not whole yet: how many of its bytes were looked at (for its end, for bare LFs),
        # so that a head sent in many small pieces is not scanned again from its start at each.
        self._looked = 0
        self._busy = False  # a request is being answered
        self._keep_alive = True  # of the request being answered
        self._lost = False
        self._reading_paused = False
        self._write_paused = False
        self._pending: Request | None = None  # a plain request whose body is still coming
        self._body_late: asyncio.TimerHandle | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._where: tuple[Any, Any, str] = (None, None, "http")  # server, client, scheme

    def _serving(self) -> bool:
        return self._busy or self._pending is not None

    # -- connection events ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server_state.connections.add(self)  # type: ignore[arg-type]
        # uvloop's is not asyncio's class; every close of the connection lingers (lingering.py).
        self.transport = transport = LingeringTransport(cast(asyncio.Transport, transport), self.loop)
        self._where = (get_local_addr(transport), get_remote_addr(transport), "https" if is_ssl(transport) else "http")
        if self._stopping:
            self.shutdown()
        else:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        self._lost = True
        self._stop_head_wait()
        if self._body_late is not None:
            self._body_late.cancel()
        self._drained.set()
        if exc is None:
            self.transport.close()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._drained.clear()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._drained.set()

    def data_received(self, data: bytes) -> None:
        if not self._buffer:
            self._buffer = data  # most often a whole request, used as it came
        else:  # appended in place, not copied at each read
            if isinstance(self._buffer, bytes):
                self._buffer = bytearray(self._buffer)
            self._buffer += data
        if self._pending is not None:
            self._body_arrived()
        elif not self._busy:
            self._next()
        elif len(self._buffer) > _HIGH_WATER and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def shutdown(self) -> None:
        """The server is stopping: as uvicorn_serve.py's connections (its `shutdown`)."""
        if self._busy:
            self._keep_alive = False
            return
        if self._pending is not None:  # answered once its body is in, with Connection: close
            return
        self._stop_head_wait()
        self._close_when_idle(self.loop.time() + UNREAD_WAIT_S)

    # -- requests --------------------------------------------------------------------------------

    def _next(self) -> None:
        """Answers the request the buffer begins with, if its head is whole (waiting _BODY_WAIT_S for
        a body that did not come with it); hands the connection over if that request is not plain."""
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n", max(self._looked - 3, 0)) + 4
        if end == 3:  # the head is not whole yet
            if not _may_be_plain(buffer, self._looked):
                self._hand_over()
            elif len(buffer) > MAX_HEAD_BYTES:
                self._refuse_head()
            else:
                self._looked = len(buffer)
            return
        self._looked = 0
        # A head past MAX_HEAD_BYTES that came whole is uvicorn's to judge (it may serve one).
        head = _HEAD.fullmatch(buffer, 0, end) if end <= MAX_HEAD_BYTES else None
        request = None if head is None else self._plain(head, end)
        if request is None or request[2] - end > _HIGH_WATER:
            self._hand_over()
            return
        self._stop_head_wait()
        if request[2] > len(buffer):  # a client that writes the head and the body apart (httpx does)
            self._pending = request
            self._resume_reading()  # if pipelined bytes had filled the buffer: the body is behind them
            self._body_late = self.loop.call_later(_BODY_WAIT_S, self._body_not_in_time)
            return
        self._start(*request)

    def _start(self, scope: Scope, end: int, whole: int, keep_alive: bool) -> None:
        buffer = self._buffer
        body, self._buffer = bytes(buffer[end:whole]), buffer[whole:]
        if len(self._buffer) <= _HIGH_WATER:
            self._resume_reading()
        self._busy, self._keep_alive = True, keep_alive and not self._stopping
        task = self.loop.create_task(self._answer(scope, body))
        tasks = self.server_state.tasks
        task.add_done_callback(tasks.discard)
        tasks.add(task)

    def _body_arrived(self) -> None:
        assert self._pending is not None
        if len(self._buffer) >= self._pending[2]:
            request, self._pending = self._pending, None
            if self._body_late is not None:
                self._body_late.cancel()
                self._body_late = None
            self._start(*request)

    def _body_not_in_time(self) -> None:
        """Its body is slow: uvicorn's cycle takes the request, under the body deadline."""
        self._pending = self._body_late = None
        self._hand_over()

    def _plain(self, head: re.Match[bytes], end: int) -> Request | None:
        """The plain hot request whose head ends at `end`; None for any other."""
        method, target, fields = head.groups()
        headers = [(name.lower(), value) for name, value in _FIELD.findall(fields)]
        length: int | None = None
        keep_alive = True
        for name, value in headers:
            if name == b"content-length":
                if length is not None or not value.isdigit() or len(value) > 18:
                    return None
                length = int(value)
            elif name in _NOT_PLAIN:
                return None
            elif name == b"connection":
                tokens = {token.strip().lower() for token in value.split(b",")}
                if b"upgrade" in tokens:
                    return None
                keep_alive = keep_alive and b"close" not in tokens  # one saying close is enough
        scope = self._scope(method.decode("ascii"), target, headers)
        if scope is None or not self._hot.accepts(scope):
            return None
        return scope, end, end + (length or 0), keep_alive

    def _scope(self, method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> Scope | None:
        """The scope uvicorn's protocol would make (its on_message_begin and on_headers_complete)."""
        try:
            url = httptools.parse_url(target)
        except httptools.HttpParserInvalidURLError:
            return None
        raw_path: bytes = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root_path: str = self.config.root_path
        server, client, scheme = self._where
        return {
            "type": "http",
            "asgi": self._asgi,
            "http_version": "1.1",
            "server": server,
            "client": client,
            "scheme": scheme,
            "root_path": root_path,
            "headers": headers,
            "state": self.app_state.copy(),
            "method": method,
            "path": root_path + path,
            "raw_path": root_path.encode("ascii") + raw_path,
            "query_string": url.query or b"",
        }

    async def _answer(self, scope: Scope, body: bytes) -> None:
        taken = answered = False

        async def receive() -> Message:
            nonlocal taken
            taken = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def write(answer: Answer) -> None:
            nonlocal answered
            if not taken and has_body(scope):  # the body deadline's rule (web/middleware.py), as uvicorn_hot.py
                answer[1].append(CLOSE)
                self._keep_alive = False
            if self._write_paused and not self._lost:  # a client not reading its answers holds the next back
                await self._drained.wait()
            answered = True  # this request's: by the time respond returns, a pipelined one may be under way
            self._write(answer)

        try:
            await self._hot.respond(scope, receive, write)
        except BaseException as exc:  # as uvicorn's run_asgi
            log.error("Exception in ASGI application", exc_info=exc)
            if not answered and not self._lost:
                self._keep_alive = False
                self._write(ANSWER_500)
            self.transport.close()

    def _write(self, answer: Answer) -> None:
        self.server_state.total_requests += 1
        if self._lost:
            return
        status, headers, content = answer
        close = not self._keep_alive
        default_headers = self.server_state.default_headers
        self.transport.write(answer_bytes(STATUS_LINE[status], default_headers, headers, content, close))
        self._busy = False
        if close:
            self.transport.close()
            return
        self._await_head()
        if self._buffer:  # pipelined, whole or not
            self._next()

    def _resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def _refuse_head(self) -> None:
        self._stop_head_wait()
        self.transport.write(refusal_bytes(self.server_state.default_headers, 431, HEAD_TOO_LARGE))
        self.transport.close()

    def _hand_over(self) -> None:
        self.server_state.connections.discard(self)
        self._stop_head_wait()
        self._resume_reading()  # the successor's flow control starts with reading on
        successor = self.successor(config=self.config, server_state=self.server_state, app_state=self.app_state)
        self.transport.set_protocol(successor)  # type: ignore[arg-type]
        data, self._buffer, self._looked = bytes(self._buffer), b"", 0
        successor.take_over(self.transport, data, self._write_paused)


def _may_be_plain(unended: bytes | bytearray, looked: int) -> bool:
    """Whether a head not whole yet may still become a plain one: its first line (when whole) a
    plain request line, and every line end CRLF (llhttp refuses a bare LF at once); the first
    `looked` bytes were found so before (a CRLF may span the two parts)."""
    line_end = unended.find(b"\n")
    if line_end < 0:
        return any(unended[: len(start)] == start[: len(unended)] for start in _STARTS)
    if not _REQUEST_LINE.fullmatch(unended, 0, line_end + 1):
        return False
    return unended.count(b"\n", looked) == unended.count(b"\r\n", max(looked - 1, 0))
