"""Pool registry: one Engine per configured Redis deployment, and the clients behind it.

Three kinds of deployment, each with a request client and a blocking (BRPOP) client:

- standalone: a URL. Its script steps, the hot path, go through an auto-pipelining client of
  their own (store/pipelined.py) instead of the request client.
- sentinel: the sentinels are asked for the master. redis-py asks them again only when it
  opens a connection, and a master demoted by `SENTINEL FAILOVER` keeps accepting writes
  until the sentinel reconfigures it, up to 10 s later (its INFO period); writes it takes
  then are lost when it resyncs from the new master. So our pool also asks the sentinels
  at most every MASTER_CHECK_S while it is in use and drops connections to a former
  master, and a connection answered READONLY or UNBLOCKED (a BRPOP cut short by the
  demotion) reconnects to the current master and retries once.
- cluster: RedisCluster, routing every step by its keys' {ns} hash tag.

`get` answers the JobStore (store/jobstore.py) serving a pool: its Engine, or for a pool with
`migrate_to` a MigrationEngine (store/migration.py) over both pools' Engines, while `engines()`
lists every pool's own Engine, so a pump runs on the old pool as well as on the new one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Self

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import NotFound
from lmstfy_py.store import wake
from lmstfy_py.store.contracts import Scripts
from lmstfy_py.store.counted import CommandCounter, CountedCluster, CountedRedis, ignore
from lmstfy_py.store.engine import Engine, EngineObserver, TimerSignal
from lmstfy_py.store.faults import outage_reason
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.store.lmstfy_format import LmstfyLayout, holds_lmstfy_data
from lmstfy_py.store.migration import MigrationEngine
from lmstfy_py.store.pipelined import PipelinedRedis

# A Redis that stops answering (frozen, partitioned) fails a command after this long, and the
# request that made it answers 503: every request is answered within about this of Redis
# going silent. Redis runs a command in microseconds; this only bounds a wait for a dead peer.
REQUEST_TIMEOUT_S = 2.0
CONNECT_TIMEOUT_S = 1.0
# Requests past max_connections wait this long for a free connection (standalone pools; the
# Cluster and Sentinel pools of redis-py refuse at once, which answers 503). Redis runs one
# command at a time, so more connections would not make it faster, only use its memory. Short,
# so that a request that waited for a connection still ends within REQUEST_TIMEOUT_S + this.
POOL_WAIT_S = 0.5


class _RetryBrokenConnection(Retry):
    """One immediate retry of a command whose connection failed (an idle connection dropped by a
    Redis restart, a master switch, see above), never of one that timed out: it may be running,
    and a retry would double a request's wait. Nor of a LOADING answer: Redis is there, not ready.
    """

    def __init__(self) -> None:
        super().__init__(NoBackoff(), 1, supported_errors=(RedisConnectionError,))

    async def call_with_retry(
        self, do: Any, fail: Any, is_retryable: Any = None, with_failure_count: bool = False
    ) -> Any:
        def retryable(error: Exception) -> bool:
            return not isinstance(error, BusyLoadingError) and (is_retryable is None or is_retryable(error))

        return await super().call_with_retry(do, fail, retryable, with_failure_count)


_COMMON: dict[str, Any] = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "retry": _RetryBrokenConnection()}
_REQUEST: dict[str, Any] = {**_COMMON, "socket_timeout": REQUEST_TIMEOUT_S, "max_connections": 128}
# The shared wake loop's BRPOP waits up to wake.MAX_SLICE_S: its socket must not time out first.
_BLOCKING: dict[str, Any] = {**_COMMON, "socket_timeout": wake.MAX_SLICE_S + 5.0, "max_connections": 10_000}
_SENTINEL: dict[str, Any] = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}

MASTER_CHECK_S = 1.0


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def node(config: PoolConfig) -> str:
    """The pool's Redis as lmstfy's metrics name a node: its address as configured (host:port, a unix
    socket's path; a Sentinel or Cluster pool's addresses, comma-separated)."""
    if config.kind == "cluster":
        return ",".join(config.cluster_nodes)
    if config.kind == "sentinel":
        return ",".join(config.sentinels)
    assert config.url is not None
    options = parse_url(config.url)
    return str(options.get("path") or f"{options.get('host', 'localhost')}:{options.get('port', 6379)}")


def connect(config: PoolConfig, counter: CommandCounter = ignore) -> tuple[Redis | RedisCluster, Redis | RedisCluster]:
    """The request client and the blocking (BRPOP) client of one pool, both telling `counter` of each command."""
    if config.kind == "cluster":
        return _cluster_client(config, _REQUEST, counter), _cluster_client(config, _BLOCKING, counter)
    if config.kind == "sentinel":
        return _sentinel_client(config, _REQUEST, counter), _sentinel_client(config, _BLOCKING, counter)
    assert config.url is not None
    requests = BlockingConnectionPool.from_url(config.url, timeout=POOL_WAIT_S, **_REQUEST)
    blocking = ConnectionPool.from_url(config.url, **_BLOCKING)
    return CountedRedis.owning(requests, counter), CountedRedis.owning(blocking, counter)


def script_client(config: PoolConfig, counter: CommandCounter = ignore) -> PipelinedRedis | None:
    """The auto-pipelining client of a standalone pool's script steps; None where redis-py serves them."""
    if config.kind != "standalone" or config.url is None or not PipelinedRedis.supports(config.url):
        return None
    return PipelinedRedis(config.url, CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S, counter=counter)


def engine(
    name: str,
    config: PoolConfig,
    scripts: Scripts | None = None,
    observer: EngineObserver | None = None,
    timers: TimerSignal | None = None,
    counter: CommandCounter = ignore,
) -> Engine:
    """The Engine of one pool, with the clients its kind gets, all telling `counter` of their commands."""
    requests, blocking = connect(config, counter)
    return Engine(
        name,
        requests,
        blocking,
        scripts=scripts or Scripts.load(),
        script_client=script_client(config, counter),
        observer=observer,
        timers=timers,
    )


def _cluster_client(config: PoolConfig, options: dict[str, Any], counter: CommandCounter) -> RedisCluster:
    nodes = [ClusterNode(*_host_port(address)) for address in config.cluster_nodes]
    return CountedCluster(counter, startup_nodes=nodes, password=config.password, **options)


def _sentinel_client(config: PoolConfig, options: dict[str, Any], counter: CommandCounter) -> Redis:
    # A Sentinel of its own per client: the client's pool closes it (see _SentinelPool.aclose).
    sentinel = Sentinel(
        [_host_port(address) for address in config.sentinels],
        sentinel_kwargs={**_SENTINEL, "password": config.sentinel_password},
        password=config.password,
        db=config.db,
    )
    assert config.master_name is not None
    # What sentinel.master_for makes, but a CountedRedis.
    pool_options = {**sentinel.connection_kwargs, **options, "is_master": True, "connection_class": _SentinelConnection}
    return CountedRedis.owning(_SentinelPool(config.master_name, sentinel, **pool_options), counter)


class _SentinelConnection(SentinelManagedConnection):
    async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        # redis-py's retry reconnects here, to the last address it knew (a former master after a
        # failover; redis-py issue #3874): ask the sentinels first, as SentinelManagedConnection.connect does.
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]
        await super().send_packed_command(*args, **kwargs)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as exc:
            # The master we block on was demoted: like READONLY (which the base class handles),
            # reconnect to the new master on the retry.
            if not str(exc).startswith("UNBLOCKED"):
                raise
            await self.disconnect()
            raise RedisConnectionError("the master was demoted during a blocking command") from exc


class _SentinelPool(SentinelConnectionPool):
    """Follows the sentinels' master even on connections that never fail (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._next_check = 0.0

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await self._check_master()
        connection = await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        if self.master_address is not None and (connection.host, connection.port) != self.master_address:
            # Taken from the pool while still connected to a former master.
            try:
                await connection.disconnect()
                await self.ensure_connection(connection)
            except BaseException:
                await self.release(connection)
                raise
        return connection

    async def _check_master(self) -> None:
        if time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + MASTER_CHECK_S
        # Sentinels unreachable but the master fine: keep using it; a failed connect asks again.
        with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
            # Drops idle connections when the master moved.
            await self.get_master_address()  # type: ignore[no-untyped-call]

    async def aclose(self) -> None:
        await super().aclose()
        await self.sentinel_manager.aclose()


class Served(dict[str, "JobStore"]):
    """Pool name -> the JobStore serving it; a name not served raises NotFound. A dict, so that a
    data request's lookup (web/hot_routes.check_token) is one subscript."""

    def __missing__(self, name: str) -> JobStore:
        raise NotFound("pool not found")


class Pools:
    """Pool name -> the JobStore serving it: its Engine; for a pool holding what lmstfy left
    (serve_lmstfy_layouts), its Engine with an LmstfyLayout; a MigrationEngine for a pool with migrate_to."""

    def __init__(self, engines: Mapping[str, Engine], migrate_to: Mapping[str, str] | None = None) -> None:
        self._engines = dict(engines)
        self._migrate_to = dict(migrate_to or {})
        self.lmstfy_layouts: dict[str, LmstfyLayout] = {}
        self.lmstfy_unsure: set[str] = set()  # "auto" pools whose Redis could not be asked at start
        self.served = Served()
        self._compose()

    def _compose(self) -> None:
        layouts = {name: self._engines[name].with_layout(layout) for name, layout in self.lmstfy_layouts.items()}
        sources = {**self._engines, **layouts}
        self.served = Served(sources)
        for old, new in self._migrate_to.items():
            self.served[old] = MigrationEngine(sources[old], self._engines[new])

    async def serve_lmstfy_layouts(self, configs: Mapping[str, PoolConfig]) -> list[LmstfyLayout]:
        """Serves what lmstfy left in a pool's Redis, in place: pools of format "lmstfy", and of
        format "auto" (not a cluster) whose Redis holds lmstfy's keys. Returns them."""
        for name, config in configs.items():
            engine = self._engines[name]
            if config.format == "lmstfy":
                self.lmstfy_layouts[name] = LmstfyLayout(engine)
            elif config.format == "auto" and config.kind != "cluster":
                try:
                    found = await holds_lmstfy_data(engine.redis)
                except Exception as exc:
                    if outage_reason(exc) is None:
                        raise
                    # A Redis away at start may still hold lmstfy's jobs: served as if it did until
                    # the pool's LmstfyMover can look.
                    self.lmstfy_unsure.add(name)
                    found = True
                if found:
                    self.lmstfy_layouts[name] = LmstfyLayout(engine)
        self._compose()
        return list(self.lmstfy_layouts.values())

    @classmethod
    def connect(
        cls,
        configs: Mapping[str, PoolConfig],
        observer: EngineObserver | None = None,
        timers: Mapping[str, TimerSignal] | None = None,
        counters: Callable[[str], CommandCounter] | None = None,
    ) -> Pools:
        """Every pool's Engine, each counted by `observer`, telling its timers to `timers[pool]`, and
        its clients' Redis commands to `counters(node(config))`."""
        scripts = Scripts.load()
        engines = {
            name: engine(
                name, cfg, scripts, observer, (timers or {}).get(name), counters(node(cfg)) if counters else ignore
            )
            for name, cfg in configs.items()
        }
        return cls(engines, {name: cfg.migrate_to for name, cfg in configs.items() if cfg.migrate_to})

    def get(self, name: str) -> JobStore:
        """The JobStore serving pool `name`."""
        return self.served[name]

    def own(self, name: str) -> Engine:
        """Pool `name`'s own Engine, migrating or not (its Redis holds what the admin pool keeps)."""
        return self._engines[name]

    def __contains__(self, name: object) -> bool:
        return name in self._engines

    def names(self) -> list[str]:
        return sorted(self._engines)

    def engines(self) -> list[Engine]:
        """Every pool's own Engine, migrating or not: what the pumps run on."""
        return list(self._engines.values())

    async def close(self) -> None:
        for engine in self._engines.values():
            await engine.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
