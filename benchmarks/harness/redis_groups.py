"""Multi-process Redis deployments for tests: a Sentinel group, a 3-master Redis Cluster, and one
with a replica per master.

Both are built from `RedisProcess` (the same binary the embedded mode runs) and start in well
under a second, so a session fixture can afford them:

- `SentinelGroup`: two data nodes (a master and its replica) and one sentinel watching them,
  all password-protected (the data nodes with `password`, the sentinel with its own), so the
  pool's `password` and `sentinel_password` are both exercised. `failover()` makes the
  sentinel promote the replica, the way an operator or a crashed master would.
- `Cluster`: three masters splitting the 16384 slots, so the pump's pool-wide keys ("due",
  "nss") and each namespace's keys usually live on different nodes.
- `ReplicatedCluster`: the same with a replica per master and a 1 s cluster-node-timeout, so a
  killed master's replica takes over within about 2.5 s (fault tests).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from benchmarks.harness.ports import free_port
from benchmarks.harness.redis_servers import (
    CLUSTER_SLOTS,
    READY_TIMEOUT,
    RedisProcess,
    _cluster_info,
    free_cluster_port,
)
from lmstfy_py.store.embedded import EmbeddedRedisError, spawn_redis, stop_process

MASTER_NAME = "lmstfy"
DATA_PASSWORD = "data-secret"
SENTINEL_PASSWORD = "sentinel-secret"


def wait_until(check: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {timeout:g}s: {what}")
        time.sleep(0.02)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return False


# -- Sentinel --------------------------------------------------------------------------


class _DataNode(RedisProcess):
    """A password-protected data node. The password is set after start-up: the raw PING that
    RedisProcess.start waits for would otherwise be answered NOAUTH."""

    def start(self) -> None:
        if self.running:
            return
        super().start()
        with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5) as conn:
            conn.config_set("requirepass", DATA_PASSWORD)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=DATA_PASSWORD, socket_timeout=5)


class _Sentinel:
    """One sentinel process watching MASTER_NAME, requiring SENTINEL_PASSWORD."""

    def __init__(self, workdir: Path, master_port: int) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.master_port = master_port
        self.log_path = workdir / "sentinel.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> Path:
        path = self.workdir / "sentinel.conf"  # the sentinel rewrites it as it learns the topology
        path.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.workdir}\nlogfile {self.log_path}\n"
            f"requirepass {SENTINEL_PASSWORD}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} 1\n"
            f"sentinel auth-pass {MASTER_NAME} {DATA_PASSWORD}\n"
            # Quick to notice a dead master and to retry a failover, so fault tests stay short.
            f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
            f"sentinel failover-timeout {MASTER_NAME} 5000\n"
        )
        return path

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc = spawn_redis([str(self._write_config()), "--sentinel"], self.log_path)
        with self.client() as conn:
            wait_until(lambda: _answers(conn), f"sentinel on port {self.port}, see {self.log_path}")

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=SENTINEL_PASSWORD, socket_timeout=5)

    def master_port_now(self) -> int:
        with self.client() as conn:
            _, port = conn.sentinel_get_master_addr_by_name(MASTER_NAME)
        return int(port)

    def replica_promotable(self) -> bool:
        """The sentinel has a live link to the replica, so a failover will not answer NOGOODSLAVE."""
        with self.client() as conn:
            replicas = conn.sentinel_slaves(MASTER_NAME)
        return len(replicas) == 1 and replicas[0]["flags"] == "slave" and replicas[0]["info-refresh"] < 20_000


class SentinelGroup:
    """A master, its replica and a sentinel; `master()`/`replica()` follow failovers."""

    def __init__(self, workdir: Path) -> None:
        first = _DataNode(workdir / "a", extra_args=_data_args())
        second = _DataNode(workdir / "b", extra_args=_data_args(replica_of=first.port))
        self.nodes = (first, second)
        self.sentinel = _Sentinel(workdir / "sentinel", first.port)

    @property
    def sentinel_address(self) -> str:
        return f"127.0.0.1:{self.sentinel.port}"

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        # The sentinel finds replicas through the master's INFO, which it reads at once and then only
        # every 10 s: start it after the replica is attached, or the first failover waits for that.
        wait_until(lambda: _online_replicas(self.master()) == 1, "replica in sync")
        self.sentinel.start()
        wait_until(self.sentinel.replica_promotable, "sentinel sees the replica")

    def stop(self) -> None:
        self.sentinel.stop()
        for node in self.nodes:
            node.stop()

    def master(self) -> _DataNode:
        port = self.sentinel.master_port_now() if self.sentinel.running else self.nodes[0].port
        return next(node for node in self.nodes if node.port == port)

    def replica(self) -> _DataNode:
        master = self.master()
        return next(node for node in self.nodes if node is not master)

    def flushall(self) -> None:
        with self.master().client() as conn:
            conn.flushall()
            conn.execute_command("WAIT", 1, 2000)  # the replica flushed too: it may be master next

    def failover(self) -> tuple[_DataNode, _DataNode]:
        """Makes the sentinel promote the replica; returns (old master, new master) once it has.

        The old master is left as the sentinel leaves it: still a writable master until the
        sentinel's next look at it (up to 10 s), unless `demote` is called first.
        """
        wait_until(self.sentinel.replica_promotable, "replica promotable", timeout=30)
        old, new = self.master(), self.replica()
        with self.sentinel.client() as conn:
            conn.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        wait_until(lambda: self.sentinel.master_port_now() == new.port and _role(new) == "master", "new master")
        return old, new

    def crash_master(self) -> tuple[_DataNode, _DataNode]:
        """SIGKILLs the master; returns (dead master, new master) once the sentinel has promoted the replica."""
        wait_until(self.sentinel.replica_promotable, "replica promotable", timeout=30)
        old, new = self.master(), self.replica()
        old.kill()
        wait_until(lambda: self.sentinel.master_port_now() == new.port and _role(new) == "master", "new master")
        return old, new

    def revive(self, dead: _DataNode, master: _DataNode) -> None:
        """Restarts a crashed node as a replica of `master`, as an operator would."""
        dead.extra_args = _data_args(replica_of=master.port)
        dead.start()
        wait_until(lambda: _online_replicas(master) == 1, "revived node in sync")

    def demote(self, old: _DataNode, new: _DataNode) -> None:
        """What the sentinel does to a former master when it next looks at it, only sooner."""
        with old.client() as conn:
            conn.execute_command("REPLICAOF", "127.0.0.1", new.port)
        wait_until(lambda: _online_replicas(new) == 1, "old master re-attached as a replica")


def _data_args(replica_of: int | None = None) -> list[str]:
    # The master waits 5 s for more replicas before a full sync unless told not to.
    args = ["--masterauth", DATA_PASSWORD, "--repl-diskless-sync-delay", "0"]
    return args if replica_of is None else [*args, "--replicaof", "127.0.0.1", str(replica_of)]


def _online_replicas(node: RedisProcess) -> int:
    with node.client() as conn:
        info = conn.info("replication")
    return sum(1 for key, value in info.items() if key.startswith("slave") and value.get("state") == "online")


def _role(node: RedisProcess) -> str:
    with node.client() as conn:
        return str(conn.info("replication")["role"])


# -- Cluster ---------------------------------------------------------------------------


class _ClusterMember(RedisProcess):
    def __init__(self, workdir: Path) -> None:
        args = ["--cluster-enabled", "yes", "--cluster-config-file", str(workdir / "nodes.conf")]
        super().__init__(workdir, port=free_cluster_port(), extra_args=args)


class Cluster:
    """Three masters, one third of the slots each, no replicas."""

    SIZE = 3

    def __init__(self, workdir: Path) -> None:
        self.nodes = [_ClusterMember(workdir / f"node{i}") for i in range(self.SIZE)]

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> None:
        """Starts the nodes; a fresh cluster is built, a restarted one keeps its nodes.conf."""
        fresh = not any(node.running for node in self.nodes) and not (self.nodes[0].workdir / "nodes.conf").exists()
        for node in self.nodes:
            node.start()
        if fresh:
            self._assign_slots()
            self._meet()
        wait_until(self._healthy, "cluster_state:ok on every node with 3 masters known")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def _assign_slots(self) -> None:
        share = -(-CLUSTER_SLOTS // self.SIZE)
        for i, node in enumerate(self.nodes):
            first, last = i * share, min((i + 1) * share, CLUSTER_SLOTS) - 1
            with node.client() as conn:
                conn.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))

    def _meet(self) -> None:
        with self.nodes[0].client() as conn:
            for node in self.nodes[1:]:
                conn.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)

    def _healthy(self) -> bool:
        return all(_cluster_ready(node, self.SIZE) for node in self.nodes)


def _cluster_ready(node: RedisProcess, size: int) -> bool:
    with node.client() as conn:
        info = _cluster_info(conn)
    return info.get("cluster_state") == "ok" and info.get("cluster_known_nodes") == str(size)


# -- Cluster with replicas -------------------------------------------------------------

# Small, so that a master's death is noticed and its replica promoted within about 2-3 s.
FAILOVER_NODE_TIMEOUT_MS = 1000


class _ReplicatedMember(RedisProcess):
    def __init__(self, workdir: Path) -> None:
        args = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(workdir / "nodes.conf"),
            "--cluster-node-timeout", str(FAILOVER_NODE_TIMEOUT_MS),
            # A replica whose link to its master was lost long ago still takes over: a test
            # kills masters in turn, whatever their replicas last heard.
            "--cluster-replica-validity-factor", "0",
            "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip
        super().__init__(workdir, port=free_cluster_port(), extra_args=args)

    def node_id(self) -> str:
        with self.client() as conn:
            return str(conn.execute_command("CLUSTER", "MYID").decode())

    def first_start(self, attempts: int = 3) -> None:
        """The first start, on another free port when another process bound the one picked (or its
        bus port) meanwhile: a restart (`start`) keeps its port, for the cluster knows it."""
        for attempt in range(attempts):
            try:
                self.start()
                return
            except EmbeddedRedisError as refused:
                if "Failed listening" not in str(refused) or attempt == attempts - 1:
                    raise
                self.port = free_cluster_port()


class ReplicatedCluster:
    """Three masters splitting the slots, each with one replica (cluster-node-timeout
    FAILOVER_NODE_TIMEOUT_MS). `crash_master_of(slot)` SIGKILLs the master serving a slot and
    returns once its replica serves it; `revive(node)` brings the dead node back, as the new
    master's replica. Nodes keep no data on disk: a revived node resyncs from its master."""

    MASTERS = 3

    def __init__(self, workdir: Path) -> None:
        self.nodes = [_ReplicatedMember(workdir / f"node{i}") for i in range(2 * self.MASTERS)]

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> None:
        for node in self.nodes:
            node.first_start()
        masters, replicas = self.nodes[: self.MASTERS], self.nodes[self.MASTERS :]
        share = -(-CLUSTER_SLOTS // self.MASTERS)
        for i, master in enumerate(masters):
            with master.client() as conn:  # ADDSLOTS, not ADDSLOTSRANGE: Redis 6.2 has no ranges
                conn.execute_command("CLUSTER", "ADDSLOTS", *range(i * share, min((i + 1) * share, CLUSTER_SLOTS)))
        with masters[0].client() as conn:
            for node in self.nodes[1:]:
                conn.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        wait_until(lambda: all(_known_nodes(node) == len(self.nodes) for node in self.nodes), "every node met")
        for master, replica in zip(masters, replicas, strict=True):
            master_id = master.node_id()
            with replica.client() as conn:
                conn.execute_command("CLUSTER", "REPLICATE", master_id)
        self.wait_healthy()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def live(self) -> list[_ReplicatedMember]:
        return [node for node in self.nodes if node.running]

    def master_of(self, slot: int) -> _ReplicatedMember:
        """The node serving `slot`, as a live node's slot table says."""
        with self.live()[0].client() as conn:
            for first, last, master, *_ in conn.execute_command("CLUSTER", "SLOTS"):
                if first <= slot <= last:
                    return next(node for node in self.nodes if node.port == int(master[1]))
        raise RuntimeError(f"slot {slot} is not served")

    def slot_of(self, key: str) -> int:
        with self.live()[0].client() as conn:
            return int(conn.execute_command("CLUSTER", "KEYSLOT", key))

    def wait_healthy(self, timeout: float = READY_TIMEOUT) -> None:
        """Every node up, cluster_state ok everywhere, each master with one replica in sync."""
        wait_until(self._healthy, "3 masters with a replica in sync each, cluster_state:ok everywhere", timeout)

    def _healthy(self) -> bool:
        try:
            if len(self.live()) != len(self.nodes) or not all(_cluster_ok(node) for node in self.nodes):
                return False
            masters = [node for node in self.nodes if _role(node) == "master"]
            return len(masters) == self.MASTERS and all(_online_replicas(m) == 1 for m in masters)
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            return False

    def replicated(self) -> None:
        """Returns once every master's writes so far reached its replica."""
        for node in self.nodes:
            if _role(node) == "master":
                with node.client() as conn:
                    conn.execute_command("WAIT", 1, 2000)

    def crash_master_of(self, slot: int, timeout: float = 15.0) -> _ReplicatedMember:
        """SIGKILLs the master serving `slot`; returns it once another node serves the slot and the
        live nodes say cluster_state:ok."""
        dead = self.master_of(slot)
        dead.kill()
        wait_until(
            lambda: self.master_of(slot) is not dead and all(_cluster_ok(node) for node in self.live()),
            f"slot {slot} served again after its master died",
            timeout,
        )
        return dead

    def revive(self, dead: _ReplicatedMember, timeout: float = 15.0) -> None:
        """Restarts a crashed node: it learns from the others that it lost its slots and resyncs as a replica."""
        dead.start()
        self.wait_healthy(timeout)

    def flushall(self) -> None:
        for node in self.nodes:
            if _role(node) == "master":
                node.flushall()


def _known_nodes(node: RedisProcess) -> int:
    with node.client() as conn:
        return int(_cluster_info(conn).get("cluster_known_nodes", "0"))


def _cluster_ok(node: RedisProcess) -> bool:
    try:
        with node.client() as conn:
            return _cluster_info(conn).get("cluster_state") == "ok"
    except (redis.ConnectionError, redis.TimeoutError):
        return False
