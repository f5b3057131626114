"""The lingering close both HTTP servers end a connection with (RFC 9112, 9.6).

A server that closes a connection while its client is still sending (a refused head or body, an
answer given before the body was read, a `Connection: close` while the next request is on its
way) makes the kernel reset it: Linux answers bytes arriving after the close, or left unread at
it, with a RST, and a RST destroys what the client had received and not read yet, the answer
included. So the server only half-closes at first: it sends its FIN after the answer, then reads
and drops what still comes, and closes once the client has closed its side, or has sent nothing
for LINGER_IDLE_S (it has stopped sending and had the time to read), or LINGER_MAX_S after the
answer at most (a client uploading for longer is reset then: the answer came long before).

`Linger` is that wait, for a transport whose reads the caller drops (hypercorn_serve.py's read
loop); `LingeringTransport` gives uvicorn's protocols a transport whose every close lingers, their
own and uvicorn's alike, by handing the connection to a protocol that drops what it reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

LINGER_IDLE_S = 0.5
LINGER_MAX_S = 5.0


class Linger:
    """Closes `transport` once its reads have been idle LINGER_IDLE_S, or LINGER_MAX_S from now.
    The caller has half-closed it, drops what it reads and calls `read` for each read."""

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._last_read = loop.time()
        self._until = self._last_read + LINGER_MAX_S
        self._timer: asyncio.TimerHandle | None = loop.call_later(LINGER_IDLE_S, self._look)

    def read(self) -> None:
        self._last_read = self._loop.time()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _look(self) -> None:
        now = self._loop.time()
        next_look = min(self._last_read + LINGER_IDLE_S, self._until)
        if now < next_look:
            self._timer = self._loop.call_later(next_look - now, self._look)
            return
        self._timer = None
        self._transport.close()


def half_close(transport: asyncio.WriteTransport) -> bool:
    """Sends the FIN after what is written; False where the transport cannot (TLS) or is closing."""
    if transport.is_closing() or not transport.can_write_eof():
        return False
    transport.write_eof()
    return True


class _Dropping(asyncio.Protocol):
    """A lingering connection's protocol: what the client still sends is read and dropped."""

    def __init__(self, linger: Linger) -> None:
        self._linger = linger

    def data_received(self, data: bytes) -> None:
        self._linger.read()

    def eof_received(self) -> None:
        return None  # the client closed its side too: the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._linger.cancel()


class LingeringTransport(asyncio.Transport):
    """A connection's transport for uvicorn's protocols, whose `close` lingers (the module's
    docstring). Once closed, writes and flow control are dropped, and the protocol is told at once
    that the connection is lost, as after a close: it keeps no state for the lingering."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport, self._loop = transport, loop
        self._closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closed:
            self._transport.write(data)

    def is_closing(self) -> bool:
        return self._closed or self._transport.is_closing()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        transport = self._transport
        if not half_close(transport):
            transport.close()
            return
        protocol = transport.get_protocol()
        transport.set_protocol(_Dropping(Linger(transport, self._loop)))
        transport.resume_reading()  # the protocol's flow control may have paused it
        self._loop.call_soon(protocol.connection_lost, None)

    def abort(self) -> None:
        self._closed = True
        self._transport.abort()

    def pause_reading(self) -> None:
        if not self._closed:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if not self._closed:
            self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._transport.write_eof()
