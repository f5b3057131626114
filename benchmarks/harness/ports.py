"""Ports for the servers that tests and benchmarks start.

Chosen at random below the kernel's ephemeral range (ip_local_port_range): the kernel never gives
such a port to a connection's local end, and random picks rarely meet. A port the kernel picks
(bind to 0) comes from that range, where the tests' thousands of short connections take ports
all the time, and the kernel hands a port just released out again: a server given one failed to
bind it in fresh-clone CI runs, in setups whose ports are written into a config file and so
cannot move.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10_000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; elsewhere any range is as good


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago, below the ephemeral range when there is room."""
    below = _ephemeral_start()
    for _ in range(100 if below - _LOWEST > 1000 else 0):
        port = random.randrange(_LOWEST, below)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # the kernel's pick, then
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
