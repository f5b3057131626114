"""Real redis-server processes for tests: no fakeredis, no mocks.

`RedisProcess` runs the same binary the embedded mode uses (`find_redis_server()`) on a free
loopback port in a directory of its own, and can be stopped, killed and restarted on the
same port, which is what fault tests need. `ClusterNode` is a one-node Redis Cluster owning
all 16384 slots: enough to prove every multi-key step stays in one slot (a single node still
answers CROSSSLOT) and that `RedisCluster` clients work.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from benchmarks.harness.ports import free_port
from lmstfy_py.store.embedded import spawn_redis, stop_process, wait_for_ping

__all__ = ["ClusterNode", "RedisProcess", "free_cluster_port", "free_port"]

READY_TIMEOUT = 10.0
CLUSTER_SLOTS = 16384
CLUSTER_BUS_OFFSET = 10000


class RedisProcess:
    """One redis-server on 127.0.0.1:`port` (a free one unless given), files in `workdir`.

    `persistent=True` turns the AOF on, for tests that restart Redis and expect the data back.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        persistent: bool = False,
        binary: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.persistent = persistent
        self.binary = binary
        self.log_path = workdir / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def args(self) -> list[str]:
        return [
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--daemonize", "no",
            "--save", "",
            "--appendonly", "yes" if self.persistent else "no",
            "--logfile", str(self.log_path),
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        if self.running:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc = spawn_redis(self.args(), self.log_path, binary=self.binary)
        try:
            wait_for_ping(self._proc, ("127.0.0.1", self.port), self.log_path, READY_TIMEOUT)
        except BaseException:
            self.kill()
            raise

    def stop(self) -> None:
        """Graceful stop (SIGTERM): what an operator's restart does."""
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed."""
        if self._proc is not None:
            if self._proc.poll() is None:
                os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        """Stop and start again on the same port, so clients can reconnect to the same URL."""
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def flushall(self) -> None:
        with self.client() as conn:
            conn.flushall()


class ClusterNode(RedisProcess):
    """A single-node Redis Cluster holding every slot; `start()` returns once the cluster is ok."""

    def __init__(self, workdir: Path, *, port: int | None = None, binary: str | None = None) -> None:
        cluster_args = ["--cluster-enabled", "yes", "--cluster-config-file", str(workdir / "nodes.conf")]
        super().__init__(workdir, port=port or free_cluster_port(), extra_args=cluster_args, binary=binary)

    def start(self) -> None:
        super().start()
        with self.client() as conn:
            # After a restart nodes.conf still assigns the slots; only a fresh node needs them.
            if _cluster_info(conn).get("cluster_slots_assigned") == "0":
                _add_all_slots(conn)
            _wait_cluster_ok(conn)


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000, fixed in Redis 6.2) is free too."""
    for _ in range(100):
        port = free_port()
        if port + CLUSTER_BUS_OFFSET <= 65535 and _bindable(port + CLUSTER_BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _cluster_info(conn: redis.Redis) -> dict[str, str]:
    raw = conn.execute_command("CLUSTER", "INFO")
    if isinstance(raw, dict):  # some redis-py versions parse it already
        return {str(key): str(value) for key, value in raw.items()}
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _add_all_slots(conn: redis.Redis) -> None:
    try:
        conn.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, CLUSTER_SLOTS - 1)
    except redis.ResponseError:
        # ADDSLOTSRANGE arrived in Redis 7; 6.2 takes the slots one by one.
        for first in range(0, CLUSTER_SLOTS, 1024):
            conn.execute_command("CLUSTER", "ADDSLOTS", *range(first, min(first + 1024, CLUSTER_SLOTS)))


def _wait_cluster_ok(conn: redis.Redis, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while _cluster_info(conn).get("cluster_state") != "ok":
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster_state is not ok after {timeout:g}s: {_cluster_info(conn)}")
        time.sleep(0.02)
