"""The harness that starts real servers for tests and benchmarks (benchmarks/harness/lmstfy_servers.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from benchmarks.harness.lmstfy_servers import Server, ServerError, started_together
from benchmarks.harness.ports import free_port
from benchmarks.harness.redis_groups import _ReplicatedMember
from benchmarks.harness.redis_servers import free_cluster_port


def test_a_first_start_on_a_port_taken_meanwhile_moves_to_free_ones_and_a_restart_does_not(tmp_path: Path) -> None:
    """The ports the harness picks were free a moment before: another test's process may bind one
    before the server does (a CI run failed so), which only costs a first start another try."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = Server(tmp_path)
        server.port = taken.getsockname()[1]  # as if it had been bound between the pick and the start
        try:
            server.start()
            assert server.port != taken.getsockname()[1]
            server.stop()
            server.port = taken.getsockname()[1]  # a restart keeps its ports: its caller relies on them
            with pytest.raises(ServerError, match="Address already in use"):
                server.start()
        finally:
            server.kill() if server.running else None


def test_ports_are_chosen_below_the_ephemeral_range() -> None:
    """Where no connection's local end is ever given one (the kernel's pick, bind to 0, came from
    that range, and a server's port written into a config file was taken so in a CI run)."""
    ephemeral_start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(10_000 <= port < ephemeral_start for port in ports), ports
    assert len(set(ports)) > 40  # at random, not the kernel's next one


def test_servers_started_together_move_off_a_port_taken_meanwhile(tmp_path: Path) -> None:
    """started_together picks each server's ports in turn: the kernel may hand the next server a
    port just released (or another process may bind it) before the first binds it (a fresh-clone
    CI run failed so): that server is started again on new ports."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        servers = (Server(tmp_path / "a"), Server(tmp_path / "b"))
        servers[1].port = taken.getsockname()[1]
        with started_together(servers) as running:
            assert all(server.running for server in running)
            assert running[1].port != taken.getsockname()[1]


def test_a_cluster_node_whose_port_was_taken_meanwhile_starts_on_another(tmp_path: Path) -> None:
    """A replicated cluster's node picks its port (and its bus port, +10000) free, then starts: a
    CI run's failover test failed at setup when another process bound it in between."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_cluster_port()))  # a port a node could have (its bus port +10000 valid)
        taken.listen()
        node = _ReplicatedMember(tmp_path / "node")
        node.port = taken.getsockname()[1]
        try:
            node.first_start()
            assert node.running and node.port != taken.getsockname()[1]
        finally:
            node.kill()
