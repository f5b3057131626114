"""max_reserved and rate hold exactly under 64 concurrent consumers spread over real `lmstfy-py serve`
processes (two servers of two workers each, on one Redis), and max_reserved over a Redis Cluster
(SPEC 14): each limit is decided inside the reserve step, so no process lets one job more through.

These are correctness bounds, not speeds. The consumers count a job in flight from the arrival of its
consume's answer to the sending of its ACK, which lies within the reservation, and sample the queue's
stats meanwhile: neither may pass N. A delivery's time is its answer's arrival, never before the server
reserved it: the deliveries by any time t may not pass burst + rate * t, t counted from before the first
consume was sent. The measuring code is benchmarks/flow_limits.py, which benchmarks/bench_flow.py runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from benchmarks.flow_limits import Api, bulks_of, capped_run, publish_bulks, rated_run, worst_excess
from benchmarks.harness.lmstfy_servers import Server, started_together
from benchmarks.harness.redis_servers import RedisProcess

CONSUMERS = 64
PROPAGATION_S = 1.1  # a settings change reaches every process within 1 s (SPEC 13)
MAX_RESERVED, JOBS, HOLD_S = 4, 120, 0.01
RATE, BURST, RATE_SECONDS, RATE_JOBS = 20.0, 5, 3.0, 200
RUN_TIMEOUT_S = 30.0  # for every job to go, N at a time; a bound, not a speed


@pytest.fixture(scope="module")
def two_servers(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisProcess, http_server: str
) -> Iterator[Api]:
    """Two servers (each with its default two workers) on the session's Redis, for the module's tests."""
    redis_server.start()
    redis_server.flushall()
    workdir = tmp_path_factory.mktemp("flow")
    servers = [Server(workdir / name, redis_url=redis_server.url, http_server=http_server) for name in "ab"]
    with started_together(servers) as running:
        yield Api.of(*running)


@pytest.fixture
def cluster_api(tmp_path: Path, cluster_url: str, http_server: str) -> Iterator[Api]:
    """One server of two workers on the one-node test Redis Cluster."""
    config = tmp_path / "lmstfy.toml"
    config.write_text(f'[pools.default]\nkind = "cluster"\ncluster_nodes = ["{urlsplit(cluster_url).netloc}"]\n')
    with Server(tmp_path, config=config, args=["--workers", "2"], http_server=http_server) as server:
        yield Api.of(server.start())


async def assert_max_reserved_holds(api: Api, queue: str) -> None:
    await api.settings(queue, max_reserved=MAX_RESERVED)
    await publish_bulks(api, queue, bulks_of(JOBS), 8)
    await asyncio.sleep(PROPAGATION_S)
    got = await capped_run(api, queue, CONSUMERS, HOLD_S, RUN_TIMEOUT_S, JOBS)
    assert (len(got.ids), got.delivered) == (JOBS, JOBS), got  # every job went, once
    assert got.most_in_flight <= MAX_RESERVED, got
    assert got.most_reserved <= MAX_RESERVED and got.samples > 0, got


async def test_max_reserved_holds_under_64_consumers_on_two_servers(two_servers: Api) -> None:
    assert len(two_servers.hosts) == 2  # consumers alternate between the two servers
    await assert_max_reserved_holds(two_servers, "capped")


async def test_rate_holds_under_64_consumers_on_two_servers(two_servers: Api) -> None:
    await two_servers.settings("rated", rate=f"{RATE:g}", burst=BURST)
    await publish_bulks(two_servers, "rated", bulks_of(RATE_JOBS), 8)
    await asyncio.sleep(PROPAGATION_S)  # the bucket is full by now: BURST jobs may go at once
    started, times = await rated_run(two_servers, "rated", CONSUMERS, RATE_SECONDS)
    assert worst_excess(started, times, RATE, BURST) <= 0, [round(t - started, 3) for t in times]
    assert len(times) >= BURST  # jobs did go


async def test_max_reserved_holds_on_a_redis_cluster(cluster_api: Api) -> None:
    await assert_max_reserved_holds(cluster_api, "capped")
