"""The test Redis servers themselves: other tests rely on exactly these behaviours."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from tests.redis_procs import RedisProcess


async def test_cluster_fixture_works_with_redis_cluster(cluster_url: str) -> None:
    cluster = RedisCluster.from_url(cluster_url)
    try:
        await cluster.set("{ns}/a", b"1")
        # A script over two keys of one hash tag: the shape every lmstfy-py step takes.
        script = "return redis.call('GET', KEYS[1]) .. (redis.call('GET', KEYS[2]) or '-')"
        assert await cluster.eval(script, 2, "{ns}/a", "{ns}/b") == b"1-"
    finally:
        await cluster.aclose()


async def test_cluster_rejects_keys_of_different_slots(cluster_url: str) -> None:
    # One node owns every slot, yet cross-slot steps still fail: the bug this fixture exists to catch.
    node = aioredis.Redis.from_url(cluster_url)
    try:
        with pytest.raises(redis.ResponseError, match="same slot"):
            await node.eval("return 1", 2, "{a}/x", "{b}/y")
    finally:
        await node.aclose()


async def test_redis_url_starts_empty(redis_url: str) -> None:
    conn = aioredis.Redis.from_url(redis_url)
    try:
        assert await conn.dbsize() == 0
        await conn.set("left-behind", 1)
    finally:
        await conn.aclose()


async def test_restart_keeps_the_port(redis_server: RedisProcess, redis_url: str) -> None:
    old_pid = redis_server.pid
    redis_server.restart()
    assert redis_server.pid != old_pid
    assert redis_server.url == redis_url
    conn = aioredis.Redis.from_url(redis_url)
    try:
        assert await conn.ping()
    finally:
        await conn.aclose()


def test_killed_server_comes_back_for_the_next_test(redis_server: RedisProcess, redis_url: str) -> None:
    redis_server.kill()
    assert not redis_server.running
    with pytest.raises(redis.ConnectionError), redis.Redis.from_url(redis_url, socket_timeout=1) as conn:
        conn.ping()


def test_redis_url_restarts_a_killed_server(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as conn:
        assert conn.ping()
