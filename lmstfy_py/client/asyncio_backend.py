"""httpcore's network layer for AsyncClient's event streams, on asyncio's own transports (uvloop's
where it runs); its other requests go through http11.py, which shares `readable` from here.

httpcore's default on asyncio goes through anyio: a cancel scope and a timeout per read and
write, and, each time a pooled connection is taken, a dict of every socket attribute built to
find the socket (its "is the server closing it?" check). That was about a third of a busy
worker's CPU when its consumes went through httpcore (docs/PERFORMANCE.md, "The Python
worker"). Here a read waits on one future with one timer, a write is `transport.write` (waiting
only while the transport asks us to pause), and the socket is looked up once. httpcore still does
HTTP, pooling and the timeouts' bookkeeping; this only moves bytes.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
from httpcore import SOCKET_OPTION as SocketOption


class _Protocol(asyncio.Protocol):
    """Buffers what arrives, and wakes the one reader or writer waiting."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.error: Exception | None = None
        self.paused = False
        self._waiter: asyncio.Future[object] | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # the transport closes itself

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    async def wait(self, timeout: float | None) -> bool:
        """Until something arrives, the peer closes, or writing resumes; False when `timeout` passed first.
        One waiter at a time: HTTP/1.1 never reads and writes one connection at once."""
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return waiter.result() is None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


EXPIRED = object()


def _expire(waiter: asyncio.Future[object]) -> None:
    if not waiter.done():
        waiter.set_result(EXPIRED)


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._socket: socket.socket | None = transport.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        while not protocol.buffer:
            if protocol.eof:
                if protocol.error is not None:
                    raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
                return b""
            if not await protocol.wait(timeout):
                raise httpcore.ReadTimeout("timed out reading the answer")
        data = bytes(protocol.buffer[:max_bytes])
        del protocol.buffer[:max_bytes]
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if self._transport.is_closing() or protocol.eof:
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        while protocol.paused and not protocol.eof:
            if not await protocol.wait(timeout):
                raise httpcore.WriteTimeout("timed out writing the request")

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                tls = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if tls is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        return AsyncioStream(tls, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # Idle, yet something to read: the server is closing it (or answered out of turn).
            return bool(self._protocol.buffer) or self._protocol.eof or readable(self._socket)
        names = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername", "socket": "socket"}
        return self._transport.get_extra_info(names[info]) if info in names else None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = None if local_address is None else (local_address, 0)
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(_Protocol, host, port, local_addr=local)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _stream(transport, protocol, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {path}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _stream(transport, protocol, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def readable(sock: socket.socket | None) -> bool:
    """Whether a read would return at once (data, or the end); a socket that is gone reads its end."""
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def _stream(transport: asyncio.Transport, protocol: _Protocol, options: Iterable[SocketOption] | None) -> AsyncioStream:
    stream = AsyncioStream(transport, protocol)
    sock = transport.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)  # asyncio already set TCP_NODELAY
    return stream
