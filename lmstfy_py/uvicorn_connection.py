"""What the two connection classes of `--http-server uvicorn` share (uvicorn_plain.py's, which a
connection starts with, and uvicorn_serve.py's, which it may be handed to): the head deadline, the
careful idle close, the server's state saying it is stopping, and the bytes of an answer and of a
refusal.

The head deadline: a connection waiting for a request's head is closed `keep_alive_timeout` after
it began to wait, head complete or not, looked at by one sweep of the server's connections
(uvicorn_serve.py) rather than a timer each. The careful close: a connection is closed only when no
request is being served and the kernel holds no unread bytes for it (waited for up to
UNREAD_WAIT_S), so a request that has reached the machine is served rather than reset.
"""

from __future__ import annotations

import asyncio

from uvicorn.server import ServerState

from lmstfy_py.socket_queues import POLL_S, UNREAD_WAIT_S, unread_bytes

# A whole answer: status, headers, body (web/hot.py's Answer).
Headers = list[tuple[bytes, bytes]]
CLOSE = (b"connection", b"close")
_PHRASES = {400: b"Bad Request", 413: b"Content Too Large", 431: b"Request Header Fields Too Large"}


class StoppingState(ServerState):
    """uvicorn's per-server state, and whether the server is stopping (connections accepted during the
    stop are told at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False


class IdleClose:
    """The head deadline and the careful idle close, for a protocol with these attributes."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    timeout_keep_alive: int
    server_state: ServerState
    _head_since: float | None  # loop time since when a request's head is awaited
    _idle_poll: asyncio.TimerHandle | None  # the next look for unread bytes before a close

    def _serving(self) -> bool:
        """From a request's head to the end of its answer (pipelined requests included)."""
        raise NotImplementedError

    @property
    def _stopping(self) -> bool:
        return isinstance(self.server_state, StoppingState) and self.server_state.stopping

    def _await_head(self) -> None:
        self._stop_head_wait()
        self._head_since = self.loop.time()

    def check_head_deadline(self, now: float) -> None:
        """The server's sweep: past keep_alive_timeout without a whole head, the connection ends."""
        if self._head_since is not None and now - self._head_since >= self.timeout_keep_alive:
            self._head_since = None
            self._close_when_idle(now + UNREAD_WAIT_S)

    def _close_when_idle(self, deadline: float) -> None:
        if self.transport.is_closing() or self._serving():
            return
        if unread_bytes(self.transport.get_extra_info("socket")) and self.loop.time() < deadline:
            # The read comes in a moment: a complete head cancels this, half a head meets the next look.
            self._idle_poll = self.loop.call_later(POLL_S, self._close_when_idle, deadline)
            return
        self.transport.close()

    def _stop_head_wait(self) -> None:
        self._head_since = None
        if self._idle_poll is not None:
            self._idle_poll.cancel()
            self._idle_poll = None


def answer_bytes(status_line: bytes, default_headers: Headers, headers: Headers, body: bytes, close: bool) -> bytes:
    """The bytes uvicorn's RequestResponseCycle.send writes for a whole answer: the status line, the
    server's default headers (the Date), the answer's headers in order, `connection: close` when
    the connection ends after it and the answer did not say so, and the body."""
    head = [status_line]
    for name, value in (*default_headers, *headers):
        head += (name, b": ", value, b"\r\n")
    if close and CLOSE not in headers:
        head.append(b"connection: close\r\n")
    head += (b"\r\n", body)
    return b"".join(head)


def refusal_bytes(default_headers: Headers, status: int, body: bytes) -> bytes:
    """A refusal of a request no app saw (400, 413, 431): a JSON `body`, and the connection ends."""
    head = [b"HTTP/1.1 %d %s\r\n" % (status, _PHRASES[status])]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return b"".join(head) + body
