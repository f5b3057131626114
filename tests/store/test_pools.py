"""Each kind of pool really works: Sentinel (with passwords), a 3-master Redis Cluster, the registry."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest
from redis.asyncio.cluster import RedisCluster

from benchmarks.harness.redis_groups import SentinelGroup
from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys, pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.migration import MigrationEngine
from lmstfy_py.store.pools import Pools
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import NewJob


@pytest.fixture
async def sentinel_engine(sentinel_config: PoolConfig) -> AsyncIterator[Engine]:
    engine = pools.engine("default", sentinel_config)
    yield engine
    await engine.close()


@pytest.fixture
async def cluster3_engine(cluster3_nodes: tuple[str, ...]) -> AsyncIterator[Engine]:
    engine = pools.engine("default", PoolConfig("default", kind="cluster", cluster_nodes=cluster3_nodes))
    yield engine
    await engine.close()


async def test_sentinel_pool_serves_the_master(sentinel_engine: Engine, sentinel_group: SentinelGroup) -> None:
    job_id = (await sentinel_engine.publish("ns", "q", NewJob(b"via sentinel"))).job_id
    with sentinel_group.master().client() as master:
        assert master.exists(keys.job("ns", "q", job_id))
    [job] = await sentinel_engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=1)
    assert (job.job_id, job.body) == (job_id, b"via sentinel")
    assert await sentinel_engine.ack("ns", "q", job_id)


async def test_sentinel_pool_long_poll_is_woken_by_a_publish(sentinel_engine: Engine) -> None:
    waiting = asyncio.create_task(sentinel_engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=5_000, count=1))
    await asyncio.sleep(0.1)
    job_id = (await sentinel_engine.publish("ns", "q", NewJob(b"wake up"))).job_id
    [job] = await asyncio.wait_for(waiting, 3)
    assert job.job_id == job_id


async def test_cluster_pump_serves_namespaces_on_every_node(cluster3_engine: Engine) -> None:
    # Namespaces spread over the three masters; the pump's "due" and "nss" live on one of them.
    namespaces = [f"ns{i}" for i in range(12)]
    await cluster3_engine.redis.initialize()
    assert len({_node_of(cluster3_engine, keys.timer(ns)) for ns in namespaces}) == 3
    published = {
        ns: (await cluster3_engine.publish(ns, "q", NewJob(b"later", delay_ms=200))).job_id for ns in namespaces
    }
    pump = Pump(cluster3_engine)
    pump.start()
    try:
        for ns, job_id in published.items():
            [job] = await cluster3_engine.consume(ns, ["q"], ttr_ms=60_000, timeout_ms=3_000, count=1)
            assert job.job_id == job_id
    finally:
        await pump.stop()


async def test_cluster_sweep_repairs_a_lost_due_index(cluster3_engine: Engine) -> None:
    # A crash between a publish and its index update leaves a timer the index does not know.
    job_id = (await cluster3_engine.publish("ns", "q", NewJob(b"later", delay_ms=100))).job_id
    await cluster3_engine.redis.delete(keys.DUE_INDEX)
    pump = Pump(cluster3_engine)
    pump.start()
    try:
        [job] = await cluster3_engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=3_000, count=1)
        assert job.job_id == job_id
    finally:
        await pump.stop()


async def test_cluster_multi_queue_consume_and_bulk_publish(cluster3_engine: Engine) -> None:
    first = [p.job_id for p in await cluster3_engine.publish_many("ns", "a", [NewJob(b"a1"), NewJob(b"a2")])]
    second = (await cluster3_engine.publish("ns", "b", NewJob(b"b1"))).job_id
    jobs = await cluster3_engine.consume("ns", ["b", "a"], ttr_ms=60_000, timeout_ms=0, count=3)
    assert [job.job_id for job in jobs] == [second, *first]


def _node_of(engine: Engine, key: str) -> str:
    cluster: RedisCluster = engine.redis
    node = cluster.get_node_from_key(key)
    assert node is not None
    return str(node.name)


# -- the registry ----------------------------------------------------------------------


async def test_pools_serve_a_migrating_pool_through_a_migration_engine(redis_url: str) -> None:
    configs = {
        "default": PoolConfig("default", url=redis_url + "/0", migrate_to="new"),
        "new": PoolConfig("new", url=redis_url + "/1"),
    }
    pools = Pools.connect(configs)
    try:
        served = pools.get("default")
        assert isinstance(served, MigrationEngine)
        assert (served.old, served.new) == (pools.engines()[0], pools.get("new"))
        # Both pools keep their own engine, so both get a pump.
        assert [engine.pool for engine in pools.engines()] == ["default", "new"]
        assert pools.names() == ["default", "new"] and "new" in pools and "gone" not in pools
        with pytest.raises(NotFound, match="pool not found"):
            pools.get("gone")
    finally:
        await pools.close()


async def test_every_kind_of_pool_starts_and_closes_cleanly(
    redis_url: str, cluster3_nodes: tuple[str, ...], sentinel_config: PoolConfig
) -> None:
    configs = {
        "default": PoolConfig("default", url=redis_url),
        "cluster": PoolConfig("cluster", kind="cluster", cluster_nodes=cluster3_nodes),
        "sentinel": dataclasses.replace(sentinel_config, name="sentinel"),
    }
    pools = Pools.connect(configs)
    try:
        for name in configs:
            engine = pools.get(name)
            job_id = (await engine.publish("ns", "q", NewJob(name.encode()))).job_id
            assert (await engine.peek_job("ns", "q", job_id)).job.body == name.encode()
    finally:
        await pools.close()


async def test_standalone_clients_count_their_commands_and_own_their_pools(redis_url: str) -> None:
    counted: list[tuple[str, bool]] = []
    clients = pools.connect(
        PoolConfig("default", url=redis_url), lambda name, failed, _: counted.append((name, failed))
    )
    for client in clients:
        try:
            await client.ping()
            pipe = client.pipeline(transaction=False)
            pipe.ping()
            await pipe.execute()
        finally:
            await client.aclose()
        # Closing the client closes its pool (Redis.from_pool), as nothing else holds the pool.
        assert client.auto_close_connection_pool
    assert counted == [("PING", False), ("pipeline", False)] * 2
