"""Both apps on a real Runtime, against a real standalone Redis and a real Redis Cluster.

`runtime` is parametrized over the backends of `pool_config`, narrowed here to the standalone Redis
and the 3-master cluster, so every test that uses it (through `data`, `admin` or `token`) runs
against both. The one-node cluster (tests/store still runs every step on it) finds nothing through
the web layer that the 3-master one misses: the same CROSSSLOT checks, and more nodes. It took a
third of the parallel part's runs, and CI has 15 minutes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from tests.conftest import pool_config_of

MakeToken = Callable[[str], Awaitable[str]]


@pytest.fixture(params=["standalone", "cluster3"])
def pool_config(request: pytest.FixtureRequest) -> PoolConfig:
    return pool_config_of(request, request.param)


@pytest.fixture
def make_token(admin: httpx.AsyncClient) -> MakeToken:
    """Creates a token for a namespace through the admin API."""

    async def make(ns: str) -> str:
        response = await admin.post(f"/token/{ns}", params={"description": "test"})
        assert response.status_code == 201, response.text
        token: str = response.json()["token"]
        return token

    return make


@pytest.fixture
async def token(make_token: MakeToken) -> str:
    """A token of namespace "ns"."""
    return await make_token("ns")


def auth(token: str) -> dict[str, str]:
    return {"X-Token": token}


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


class Api:
    """Short calls for the routes the tests use most, all as namespace "ns"."""

    def __init__(self, client: httpx.AsyncClient, token: str) -> None:
        self.client = client
        self.headers = auth(token)

    async def publish(self, queue: str = "q", body: bytes = b"body", **query: int) -> str:
        response = await self.client.put(f"/api/ns/{queue}", content=body, params=query, headers=self.headers)
        assert response.status_code == 201, response.text
        job_id: str = response.json()["job_id"]
        return job_id

    async def publish_every_way(self, republished: str, **query: str) -> list[httpx.Response]:
        """A publish, a bulk publish and a republish of job `republished` to queue q, each with `query`."""
        return [
            await self.client.put("/api/ns/q", params=query, content=b"x", headers=self.headers),
            await self.client.put("/api/ns/q/bulk", params=query, content=b"[1,2]", headers=self.headers),
            await self.client.put(f"/api/ns/q/job/{republished}", params=query, content=b"x", headers=self.headers),
        ]

    async def consume(self, queues: str = "q", **query: int) -> httpx.Response:
        return await self.client.get(f"/api/ns/{queues}", params=query, headers=self.headers)

    async def consume_job(self, queues: str = "q", **query: int) -> dict[str, object]:
        response = await self.consume(queues, **query)
        assert response.status_code == 200, response.text
        job: dict[str, object] = response.json()
        return job

    async def get(self, path: str, **query: int) -> httpx.Response:
        return await self.client.get(f"/api/ns/q{path}", params=query, headers=self.headers)

    async def size(self, queue: str = "q") -> int:
        size: int = (await self.client.get(f"/api/ns/{queue}/size")).json()["size"]
        return size

    async def dead_size(self) -> int:
        size: int = (await self.client.get("/api/ns/q/deadletter/size")).json()["size"]
        return size

    async def kill_one(self, tries: int = 1) -> str:
        """A job of queue q driven into the dead letter (ttr=0 expires at once)."""
        before = await self.dead_size()
        job_id = await self.publish(tries=tries)
        for _ in range(tries):
            assert (await self.consume_job(ttr=0, timeout=2))["job_id"] == job_id
        await wait_for(lambda: self.dead_size_above(before))
        return job_id

    async def dead_size_above(self, before: int) -> bool:
        return await self.dead_size() > before


@pytest.fixture
async def api(data: httpx.AsyncClient, token: str) -> AsyncIterator[Api]:
    yield Api(data, token)


@pytest.fixture
async def two_pools(redis_url: str) -> AsyncIterator[Runtime]:
    """Pools "default" and "other", both on the test Redis: tokens and limits are kept per pool name."""
    pools = {name: PoolConfig(name, url=redis_url) for name in ("default", "other")}
    runtime = await Runtime.start(Config(pools=pools), run_pumps=False)
    try:
        yield runtime
    finally:
        await runtime.stop()
