"""Listening sockets: one shared socket for one process, one socket per worker for several.

Several workers accepting from one inherited socket do not share the load: whichever worker
wakes first takes every connection waiting in the queue (with 32 clients we saw 6 on one worker
and 26 on the other, and the busy worker capped the whole server). On Linux each worker listens
on a socket of its own instead, all bound to the same address with SO_REUSEPORT, and the kernel
spreads new connections over them by a hash of the client's address.

The parent process still binds the address first (`reserve`), so a busy port fails at start-up
with a clear message, and port 0 picks the port every worker will use. Its socket never listens:
a listening socket in the group would be given connections that nobody accepts.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass

from lmstfy_py.config import ServerConfig

BACKLOG = 1024
# Linux balances connections over SO_REUSEPORT sockets; other systems give them all to one socket.
SHARES_PORTS = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


class ListenError(OSError):
    """A listening socket could not be opened; the text names the address."""


@dataclass
class Listeners:
    """The data and admin sockets: listening, or reserved for the workers (see `reserve`)."""

    data: socket.socket
    admin: socket.socket

    def for_this_worker(self) -> Listeners:
        """Sockets this process can serve: the same ones when they listen, its own when reserved."""
        return Listeners(listening(self.data), listening(self.admin))

    def close(self) -> None:
        self.data.close()
        self.admin.close()


def open_listeners(server: ServerConfig) -> Listeners:
    """Listening sockets for one process; for several (on Linux), addresses reserved for their own."""
    open_one = reserve if server.workers > 1 and SHARES_PORTS else listen
    data = open_one(server.host, server.port, "data API")
    try:
        admin = open_one(server.admin_host, server.admin_port, "admin API")
    except BaseException:
        data.close()
        raise
    return Listeners(data, admin)


def listen(host: str, port: int, purpose: str) -> socket.socket:
    """A bound, listening TCP socket on host:port; `purpose` names it in the error."""
    sock = _bound(host, port, purpose, share=False)
    _listen(sock, purpose)
    return sock


def reserve(host: str, port: int, purpose: str) -> socket.socket:
    """A socket bound to host:port that never listens, whose address workers listen on (`listening`).

    A probe without SO_REUSEPORT binds first: it fails when anything listens there, even another
    lmstfy-py, which would otherwise silently share our port. Sockets that do not listen and have
    SO_REUSEADDR may share an address, so the probe can stay bound until the reservation is made.
    """
    probe = _bound(host, port, purpose, share=False)
    try:
        return _bound(host, probe.getsockname()[1], purpose, share=True)
    finally:
        probe.close()


def listening(sock: socket.socket) -> socket.socket:
    """`sock` when it listens; for a reserved socket, a new listening socket on its address."""
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        return sock
    host, port = sock.getsockname()[:2]
    own = _bound(host, port, "this worker", share=True)
    _listen(own, "this worker")
    return own


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _bound(host: str, port: int, purpose: str, *, share: bool) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise _error(host, port, purpose, exc) from exc
    try:
        # A restart must not wait for the old connections' TIME_WAIT to expire.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if share:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _error(host, port, purpose, exc) from exc
    sock.set_inheritable(True)
    return sock


def _listen(sock: socket.socket, purpose: str) -> None:
    try:
        sock.listen(BACKLOG)
    except OSError as exc:
        host, port = sock.getsockname()[:2]
        sock.close()
        raise _error(host, port, purpose, exc) from exc


def _error(host: str, port: int, purpose: str, exc: OSError) -> ListenError:
    return ListenError(f"cannot listen on {host}:{port} for the {purpose}: {exc.strerror or exc}")
