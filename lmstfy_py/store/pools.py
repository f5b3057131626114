"""Pool registry: one Engine per configured Redis deployment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import NotFound
from lmstfy_py.store.engine import WAIT_SLICE_S, Engine
from lmstfy_py.store.scripts import Scripts

# One immediate retry covers a dropped idle connection; more would keep a
# request hanging while Redis is down, and the scripts are safe to re-send
# (publish is idempotent by job id, the others at-least-once).
_COMMON: dict[str, Any] = {"socket_connect_timeout": 1.0, "retry": Retry(NoBackoff(), 1)}
_REQUEST: dict[str, Any] = {**_COMMON, "socket_timeout": 5.0}
# A BRPOP waits up to WAIT_SLICE_S: its socket must not time out first.
_BLOCKING: dict[str, Any] = {**_COMMON, "socket_timeout": WAIT_SLICE_S + 5.0, "max_connections": 10_000}


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def connect(config: PoolConfig) -> tuple[Any, Any]:
    """The request client and the blocking (BRPOP) client of one pool."""
    if config.kind == "cluster":
        nodes = [ClusterNode(*_host_port(a)) for a in config.cluster_nodes]
        return (
            RedisCluster(startup_nodes=nodes, password=config.password, **_REQUEST),
            RedisCluster(
                startup_nodes=[ClusterNode(n.host, n.port) for n in nodes], password=config.password, **_BLOCKING
            ),
        )
    if config.kind == "sentinel":
        sentinel = Sentinel(
            [_host_port(a) for a in config.sentinels],
            sentinel_kwargs={"password": config.sentinel_password, "socket_connect_timeout": 1.0},
            password=config.password,
            db=config.db,
        )
        assert config.master_name is not None
        return (
            sentinel.master_for(config.master_name, **_REQUEST),
            sentinel.master_for(config.master_name, **_BLOCKING),
        )
    assert config.url is not None
    return Redis.from_url(config.url, **_REQUEST), Redis.from_url(config.url, **_BLOCKING)


class Pools:
    def __init__(self, engines: Mapping[str, Engine]) -> None:
        self._engines = dict(engines)

    @classmethod
    def connect(cls, configs: Mapping[str, PoolConfig]) -> Pools:
        scripts = Scripts.load()
        return cls({name: Engine(name, *connect(cfg), scripts=scripts) for name, cfg in configs.items()})

    def get(self, name: str) -> Engine:
        engine = self._engines.get(name)
        if engine is None:
            raise NotFound("pool not found")
        return engine

    def __contains__(self, name: object) -> bool:
        return name in self._engines

    def names(self) -> list[str]:
        return sorted(self._engines)

    def engines(self) -> list[Engine]:
        return list(self._engines.values())

    async def close(self) -> None:
        for engine in self._engines.values():
            await engine.close()
