"""What the kernel holds for a socket that the server has not taken yet: the connections queued on a
listening socket, the bytes waiting on a connection (Linux; elsewhere both read as none).

Both serve loops (hypercorn_serve.py, uvicorn_serve.py) look here before they close anything, so
that a request whose bytes have reached the machine is served rather than reset: a connection
queued when the server stops, a request arriving just as an idle connection is closed.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import socket
import struct
import termios
from typing import Protocol

# How often a stop looks again for connections queued, and a closing idle connection for the bytes of
# a request that has arrived; and for how long at most.
POLL_S = 0.005
QUEUED_WAIT_S = 0.5
UNREAD_WAIT_S = 1.0
# struct tcp_info: 8 one-byte fields, then u32 rto, ato, snd_mss, rcv_mss, unacked.
_TCPI_UNACKED_END = 28


class HasFileno(Protocol):
    """A socket, or uvloop's stand-in for one (transport.get_extra_info("socket"))."""

    def fileno(self) -> int: ...


async def accept_queued(sock: socket.socket) -> None:
    """Lets the server accept the connections the kernel has already queued on `sock`: their
    requests may have arrived before the stop, and closing `sock` would reset them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + QUEUED_WAIT_S
    while queued_connections(sock) and loop.time() < deadline:
        await asyncio.sleep(POLL_S)


def queued_connections(sock: socket.socket) -> int:
    """How many connections wait in `sock`'s accept queue (Linux's TCP_INFO; elsewhere 0)."""
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None:
        return 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, _TCPI_UNACKED_END)
    except OSError:
        return 0
    # For a listening socket Linux reports its accept queue's length in tcpi_unacked.
    queued: int = struct.unpack_from("I", info, _TCPI_UNACKED_END - 4)[0]
    return queued


def unread_bytes(sock: HasFileno | None) -> int:
    """Bytes the kernel holds for this connection that the server has not read yet."""
    if sock is None:
        return 0
    count = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, count)
    except (OSError, ValueError):  # closed meanwhile (fileno -1)
        return 0
    return count[0]
