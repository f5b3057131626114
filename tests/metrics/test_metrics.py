"""GET /metrics: lmstfy's metric names after known traffic, through the real apps on real Redis,
and one `lmstfy-py serve --workers 2` whose scrapes add up what both workers counted.

Counters live for the whole test process, so pool-wide ones are compared before and after;
per-queue ones use a namespace of the test's own and are exact.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import Counter, Histogram
from redis.exceptions import ResponseError

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py import metrics, tasks
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.metrics import multiproc, pending, recording
from lmstfy_py.metrics.families import PUBLISH_QUEUE_JOBS
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import pools
from lmstfy_py.types import NewJob
from lmstfy_py.web import create_admin_app
from tests.conftest import client_for

# What a loaded machine may add to a worker's flush interval before a scrape must see its counts.
FLUSH_LATE_S = 0.5
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Key = tuple[str, frozenset[tuple[str, str]]]


class Scrape:
    """One exposition, parsed: value(name, **labels) is 0 for a series not (yet) there."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[Key, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                match = _SAMPLE.match(line)
                assert match, line
                labels = frozenset(_LABEL.findall(match[2] or ""))
                self.samples[(match[1], labels)] = float(match[3])

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def grew(self, before: Scrape, name: str, **labels: str) -> float:
        """How much a series grew since `before` (counters live as long as the test process)."""
        return self.value(name, **labels) - before.value(name, **labels)


def redis_metric(name: str) -> str:
    return "infra_lmstfy_redis_" + name


@pytest.fixture
def ns() -> str:
    return "m" + uuid.uuid4().hex[:12]


@pytest.fixture
async def headers(admin: httpx.AsyncClient, ns: str) -> dict[str, str]:
    response = await admin.post(f"/token/{ns}", params={"description": "metrics"})
    assert response.status_code == 201, response.text
    return {"X-Token": response.json()["token"]}


async def scrape(admin: httpx.AsyncClient) -> Scrape:
    response = await admin.get("/metrics")
    assert response.status_code == 200, response.text
    return Scrape(response.text)


async def publish(data: httpx.AsyncClient, path: str, headers: dict[str, str], **query: int) -> str:
    response = await data.put(path, content=b"job", params=query, headers=headers)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def consume(data: httpx.AsyncClient, path: str, headers: dict[str, str], **query: int) -> str:
    response = await data.get(path, params=query, headers=headers)
    assert response.status_code == 200, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def wait_for_dead(data: httpx.AsyncClient, path: str, size: int) -> None:
    deadline = time.monotonic() + 3
    while (await data.get(path + "/deadletter/size")).json()["size"] != size:
        assert time.monotonic() < deadline, "the job never reached the dead letter"
        await asyncio.sleep(0.02)


async def test_job_counters_sizes_and_histograms_after_known_traffic(
    runtime: Runtime, data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    before = await scrape(admin)
    q, later = f"/api/{ns}/q", f"/api/{ns}/later"
    published = [await publish(data, q, headers) for _ in range(4)]
    await publish(data, later, headers, delay=60)
    acked = await consume(data, q, headers, ttr=120)
    assert (await data.delete(f"{q}/job/{acked}", headers=headers)).status_code == 204
    assert await consume(data, q, headers, ttr=0) == published[1]  # its ttr passes at once: tries 1, dead
    await wait_for_dead(data, q, 1)
    assert await consume(data, f"/api/{ns}/later,q", headers, ttr=120) == published[2]  # stays reserved
    assert runtime.collector is not None
    await runtime.collector.refresh()
    after = await scrape(admin)

    def grew(name: str) -> float:
        return after.grew(before, redis_metric(name), pool="default")

    assert {name: grew(name) for name in ("publish_jobs", "pool_add_jobs", "queue_direct_push_jobs")} == {
        "publish_jobs": 5,
        "pool_add_jobs": 5,
        "queue_direct_push_jobs": 4,
    }
    assert (grew("timer_add_jobs"), grew("consume_jobs"), grew("consume_multi_jobs")) == (1, 2, 1)
    assert (grew("queue_pop_jobs"), grew("pool_delete_jobs"), grew("timer_due_jobs")) == (3, 1, 1)
    queue = {"pool": "default", "namespace": ns, "queue": "q"}
    assert after.value(redis_metric("publish_queue_jobs"), **queue) == 4
    assert after.value(redis_metric("publish_queue_jobs"), **{**queue, "queue": "later"}) == 1
    assert after.value(redis_metric("consume_queue_jobs"), **queue) == 3
    assert after.value(redis_metric("job_elapsed_ms_count"), **queue) == 3
    assert after.value(redis_metric("job_elapsed_ms_bucket"), **queue, le="+Inf") == 3
    assert after.value(redis_metric("job_ack_elapsed_ms_count"), **queue) == 1
    # Sizes: one job left ready, one dead; the timer holds the delayed job and the reserved one.
    assert after.value(redis_metric("queue_sizes"), **queue) == 1
    assert after.value(redis_metric("deadletter_sizes"), **queue) == 1
    assert after.value(redis_metric("queue_sizes"), **{**queue, "queue": "later"}) == 0
    assert after.value(redis_metric("timer_sizes"), pool="default") == 2


async def test_redis_gauges_describe_the_pool(runtime: Runtime, admin: httpx.AsyncClient) -> None:
    await runtime.pools.get("default").publish("gauges", "q", NewJob(b"job"))
    assert runtime.collector is not None
    await runtime.collector.refresh()
    after = await scrape(admin)
    for name in ("used_mem_bytes", "connections", "total_keys", "total_ttl_keys"):
        assert after.value(redis_metric(name), pool="default") > 0, name
    assert redis_metric("max_mem_bytes") in after.names()
    assert redis_metric("blocking_connections") in after.names()


async def test_respawn_and_republish_are_counted(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    q = f"/api/{ns}/q"
    first = await publish(data, q, headers)
    before = await scrape(admin)
    await publish(data, f"{q}/job/{first}", headers)  # re-publish: ACKs `first`
    assert await consume(data, q, headers, ttr=0) != first
    await wait_for_dead(data, q, 1)
    assert (await data.put(f"{q}/deadletter", headers=headers)).json()["count"] == 1
    after = await scrape(admin)
    for name in ("pool_delete_jobs", "publish_jobs", "deadletter_respawn_jobs"):
        assert after.grew(before, redis_metric(name), pool="default") == 1, name
    assert after.value(redis_metric("job_ack_elapsed_ms_count"), pool="default", namespace=ns, queue="q") == 1


async def test_http_requests_are_counted_by_route_template_and_status(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    before = await scrape(admin)
    await publish(data, f"/api/{ns}/q", headers)
    assert (await data.get(f"/api/{ns}/empty", headers=headers)).status_code == 404  # no job available
    assert (await data.get(f"/api/{ns}/q/size")).status_code == 200
    assert (await data.get("/no/such/route")).status_code == 404
    assert (await data.get(f"/api/{ns}/q/peek", headers={"X-Token": "wrong"})).status_code == 401
    after = await scrape(admin)

    def grew(app: str, method: str, route: str, status: str) -> float:
        return after.grew(before, "lmstfy_http_requests_total", app=app, method=method, route=route, status=status)

    assert grew("data", "PUT", "/api/{ns}/{queue}", "201") == 1
    assert grew("data", "GET", "/api/{ns}/{queue}", "404") == 1
    assert grew("data", "GET", "/api/{ns}/{queue}/size", "200") == 1
    assert grew("data", "GET", "unmatched", "404") == 1
    assert grew("data", "GET", "/api/{ns}/{queue}/peek", "401") == 1
    assert grew("admin", "GET", "/metrics", "200") == 1  # the first scrape, counted once it was answered
    put = {"app": "data", "method": "PUT", "route": "/api/{ns}/{queue}", "status": "201"}
    seconds = "lmstfy_http_request_duration_seconds_count"
    assert after.grew(before, seconds, **put) == 1

    # lmstfy's families: data port only, gin's route path, and latency of 2xx answers only.
    lmstfy = {"pool": "default", "namespace": ns, "api": "/api/:namespace/:queue"}
    assert after.value("infra_lmstfy_http_http_codes", **lmstfy, method="PUT", code="201") == 1
    assert after.value("infra_lmstfy_http_latency_milliseconds_count", **lmstfy, method="PUT") == 1
    assert after.value("infra_lmstfy_http_http_codes", **lmstfy, method="GET", code="404") == 1
    assert after.value("infra_lmstfy_http_latency_milliseconds_count", **lmstfy, method="GET") == 0
    size = {**lmstfy, "api": "/api/:namespace/:queue/size", "method": "GET", "code": "200"}
    assert after.value("infra_lmstfy_http_http_codes", **size) == 1
    assert "/metrics" not in {dict(labels).get("api") for _, labels in after.samples}


async def test_a_request_refused_before_routing_keeps_its_route(pool_config: PoolConfig) -> None:
    """Admin auth answers 401 before the router runs: the request is still counted by its route."""
    config = Config(pools={"default": pool_config}, accounts={"ops": "secret"}, metrics_public=True)
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            before = await scrape(admin)
            assert (await admin.get("/token/ns")).status_code == 401
            after = await scrape(admin)
    finally:
        await runtime.stop()
    labels = {"app": "admin", "method": "GET", "route": "/token/{ns}", "status": "401"}
    assert after.grew(before, "lmstfy_http_requests_total", **labels) == 1


async def test_a_metric_that_cannot_be_written_fails_no_request(
    data: httpx.AsyncClient, headers: dict[str, str], ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*labels: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recording, "series", disk_full)
    job_id = await publish(data, f"/api/{ns}/q", headers)  # 201, not a 503 that a client would retry
    assert await consume(data, f"/api/{ns}/q", headers) == job_id


def test_buffered_counts_write_what_prometheus_client_would() -> None:
    """A request counts into metrics/pending.py's buffers; a flush must leave the files as if each count
    had been written at once, every value in the bucket prometheus-client would have put it in."""
    bounds = (1.0, 5.0, 10.0)
    direct, buffered = (Histogram(f"h_{name}", "h", ["k"], buckets=bounds, registry=None) for name in ("a", "b"))
    values = [0.0, -1.0, 1.0, 1.0000001, 4.99, 5.0, 10.0, 10.5, 1e9]
    expected, flushed = direct.labels("x"), pending.buffered(buffered, buffered.labels("x"))
    for value in values:
        expected.observe(value)
        flushed.observe(value)
    counters = [Counter(f"c_{name}", "c", registry=None) for name in ("a", "b")]
    counters[0].inc(3.5)
    buffered_counter = pending.buffered(counters[1], counters[1])
    buffered_counter.inc(1)
    buffered_counter.inc(2.5)
    assert [bucket.get() for bucket in buffered.labels("x")._buckets] == [0.0] * 4  # nothing written yet
    metrics.flush()
    assert [b.get() for b in buffered.labels("x")._buckets] == [b.get() for b in expected._buckets] == [3, 3, 1, 2]
    assert buffered.labels("x")._sum.get() == pytest.approx(expected._sum.get())
    assert counters[1]._value.get() == counters[0]._value.get() == 3.5
    metrics.flush()  # nothing new: nothing written twice
    assert counters[1]._value.get() == 3.5


async def test_the_exposition_speaks_like_lmstfys_go_client(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    job_id = await publish(data, f"/api/{ns}/q", headers)
    assert await consume(data, f"/api/{ns}/q", headers) == job_id
    response = await admin.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.text
    # A Go counter has no _total suffix; lmstfy-py's own counters follow Prometheus's naming.
    assert "# TYPE infra_lmstfy_redis_publish_jobs counter\n" in text
    assert 'infra_lmstfy_redis_publish_jobs{pool="default"} ' in text
    assert "infra_lmstfy_redis_publish_jobs_total" not in text
    assert "# TYPE lmstfy_http_requests_total counter\n" in text
    assert "# TYPE infra_lmstfy_redis_job_elapsed_ms histogram\n" in text
    # lmstfy's buckets, written as Go writes them: ExponentialBuckets(15, 3.5, 7).
    bounds = re.findall(rf'infra_lmstfy_redis_job_elapsed_ms_bucket\{{le="([^"]+)",namespace="{ns}"', text)
    assert bounds == ["15", "52.5", "183.75", "643.125", "2250.9375", "7878.28125", "27573.984375", "+Inf"]


async def test_redis_command_families_are_lmstfy_1_0_11s(admin: httpx.AsyncClient) -> None:
    node = f"10.0.0.{uuid.uuid4().int % 250}:{uuid.uuid4().int % 60000 + 1024}"  # this test's own series
    count = metrics.redis_command_counter(node)
    count("EVALSHA", False, 0.0031)  # 3 whole ms, as Go's Milliseconds() counts
    count("EVALSHA", False, 0.0009)  # 0 ms: the first bucket, le="1"
    count("pipeline", True, 0.0009)
    count("brpop", False, 40.0)  # 40,000 ms: past the last bound
    text = (await admin.get("/metrics")).text  # a scrape writes its process's tallies first
    scraped = Scrape(text)
    assert "# TYPE infra_lmstfy_redis_qps counter\n" in text and "infra_lmstfy_redis_qps_total" not in text
    assert "# TYPE infra_lmstfy_redis_latency histogram\n" in text
    assert scraped.value("infra_lmstfy_redis_qps", node=node, command="evalsha", status="ok") == 2
    assert scraped.value("infra_lmstfy_redis_qps", node=node, command="pipeline", status="error") == 1
    ok = {"node": node, "command": "evalsha", "status": "ok"}
    assert scraped.value("infra_lmstfy_redis_latency_count", **ok) == 2
    assert scraped.value("infra_lmstfy_redis_latency_sum", **ok) == 3
    assert scraped.value("infra_lmstfy_redis_latency_bucket", le="1", **ok) == 1
    assert scraped.value("infra_lmstfy_redis_latency_bucket", le="2", **ok) == 1
    assert scraped.value("infra_lmstfy_redis_latency_bucket", le="4", **ok) == 2
    slow = {"node": node, "command": "brpop", "status": "ok"}
    assert scraped.value("infra_lmstfy_redis_latency_bucket", le="32768", **slow) == 0
    assert scraped.value("infra_lmstfy_redis_latency_bucket", le="+Inf", **slow) == 1
    assert scraped.value("infra_lmstfy_redis_latency_sum", **slow) == 40_000
    # lmstfy's buckets: prometheus.ExponentialBuckets(1, 2, 16).
    bounds = re.findall(rf'infra_lmstfy_redis_latency_bucket\{{command="evalsha",le="([^"]+)",node="{node}"', text)
    assert bounds == [str(2**n) for n in range(16)] + ["+Inf"]
    # Written once: a second scrape finds the same counts.
    assert Scrape((await admin.get("/metrics")).text).value("infra_lmstfy_redis_qps", **ok) == 2


async def test_every_redis_command_of_a_pool_is_counted(
    pool_config: PoolConfig, admin: httpx.AsyncClient, ns: str
) -> None:
    """Each client of a pool (the script steps', the requests', pipelines) counts what it sends,
    under the pool's node, as lmstfy's go-redis hook: a failed command as "error"."""
    node = f"test-{uuid.uuid4().hex[:8]}"
    engine = pools.engine("default", pool_config, counter=metrics.redis_command_counter(node))
    try:
        await engine.publish(ns, "q", NewJob(b"warm-up"))  # loads the scripts, registers the namespace
        before = await scrape(admin)
        await engine.publish(ns, "q", NewJob(b"one"))  # one FCALL (a cluster's: EVALSHA, store/scripts.py)
        await engine.publish_many(ns, "q", [NewJob(b"two"), NewJob(b"three")])  # two in one pipeline
        text_key = f"{{{ns}}}/text"
        await engine.redis.set(text_key, "x")
        with pytest.raises(ResponseError):
            await engine.redis.lpush(text_key, "y")  # WRONGTYPE
        after = await scrape(admin)
    finally:
        await engine.close()

    def grew(command: str, status: str = "ok") -> float:
        return after.grew(before, "infra_lmstfy_redis_qps", node=node, command=command, status=status)

    step = "evalsha" if pool_config.kind == "cluster" else "fcall"
    assert (grew(step), grew("pipeline"), grew("set"), grew("lpush", "error"), grew("lpush")) == (1, 1, 1, 1, 0)
    for command, status in ((step, "ok"), ("pipeline", "ok"), ("lpush", "error")):
        labels = {"node": node, "command": command, "status": status}
        assert after.value("infra_lmstfy_redis_latency_count", **labels) == after.value(
            "infra_lmstfy_redis_qps", **labels
        )


def test_a_pools_node_is_its_address_as_configured() -> None:
    assert pools.node(PoolConfig("p", url="redis://:secret@10.0.0.1:6380/2")) == "10.0.0.1:6380"
    assert pools.node(PoolConfig("p", url="redis://redis-host")) == "redis-host:6379"
    assert pools.node(PoolConfig("p", url="unix:///var/run/redis.sock")) == "/var/run/redis.sock"
    sentinels = ("10.0.0.1:26379", "10.0.0.2:26379")
    assert pools.node(PoolConfig("p", kind="sentinel", master_name="m", sentinels=sentinels)) == ",".join(sentinels)
    assert pools.node(PoolConfig("p", kind="cluster", cluster_nodes=("a:7000", "b:7000"))) == "a:7000,b:7000"


async def test_a_registered_process_has_process_metrics_labelled_by_worker(admin: httpx.AsyncClient) -> None:
    metrics.register_process("test")
    scraped = Scrape((await admin.get("/metrics")).text)
    assert scraped.value("process_resident_memory_bytes", worker="test") > 0
    assert scraped.value("process_start_time_seconds", worker="test") > 0
    assert ("process_cpu_seconds_total", frozenset({("worker", "test")})) in scraped.samples


async def test_rate_limit_hits_are_counted(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    token = headers["X-Token"]
    limit = {"read": 0, "write": 1, "interval": 60}
    assert (await admin.post(f"/token/{ns}/{token}/limit", json=limit)).status_code == 201
    refused, deadline = 0, time.monotonic() + 3
    while not refused:  # the limit reaches the data plane within the limits' refresh
        assert time.monotonic() < deadline, "never throttled"
        status = (await data.put(f"/api/{ns}/q", content=b"job", headers=headers)).status_code
        refused += status == 429
    assert (await data.put(f"/api/{ns}/q", content=b"job", headers=headers)).status_code == 429
    # The token is a secret: the label holds the first 12 hex digits of its SHA-256 (docs/API.md).
    hashed = hashlib.sha256(token.encode()).hexdigest()[:12]
    labels = {"pool": "default", "namespace": ns, "token": hashed, "action": "produce"}
    scraped = await scrape(admin)
    assert scraped.value("infra_lmstfy_http_rate_limit", **labels) == 2
    assert token not in scraped.text


async def test_metrics_need_the_admin_accounts_unless_made_public(pool_config: PoolConfig) -> None:
    """/metrics names every namespace and queue: with accounts it is theirs, unless metrics_public."""
    answers = {}
    for public in (False, True):
        config = Config(pools={"default": pool_config}, accounts={"ops": "secret"}, metrics_public=public)
        runtime = await Runtime.start(config, run_pumps=False)
        try:
            async with client_for(create_admin_app(runtime)) as admin:
                answers[public] = (
                    (await admin.get("/metrics")).status_code,
                    (await admin.get("/metrics", auth=("ops", "secret"))).status_code,
                    (await admin.get("/metrics", auth=("ops", "wrong"))).status_code,
                )
        finally:
            await runtime.stop()
    assert answers == {False: (401, 200, 401), True: (200, 200, 200)}


async def test_anonymous_requests_with_made_up_names_add_no_series(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str
) -> None:
    """Each series costs every scrape a line and every process a file entry: names nobody
    authenticated for (no token, a wrong one, a public route of a queue that does not exist, a made-up
    method) must not become labels."""

    def made_up() -> str:
        return uuid.uuid4().hex[:16]

    async def anonymous_round() -> None:
        name, queue = made_up(), made_up()
        answers = await asyncio.gather(
            data.put(f"/api/{name}/{queue}", content=b"x"),
            data.get(f"/api/{name}/{queue}", headers={"X-Token": made_up()}),
            data.get(f"/api/{name}/{queue}/size"),
            data.get(f"/api/{name}/{queue}/deadletter/size"),
            data.request(made_up().upper(), f"/api/{name}/{queue}"),
            data.delete(f"/api/{ns}/{queue}/job/01M80JAJJVYF6PEPP4G0F00000", headers={"X-Token": made_up()}),
            data.put(
                f"/api/{ns}/{queue}", content=b"x", headers={"X-Token": f"{made_up()}:{made_up()}"}
            ),  # no such pool
        )
        assert [a.status_code for a in answers] == [401, 401, 200, 200, 404, 401, 404]

    await anonymous_round()  # the first answer of each kind may make its (bounded) series
    await scrape(admin)  # a scrape is counted once answered: the next one shows it
    before = (await scrape(admin)).samples.keys()
    for _ in range(200):  # each round's names are new: a name that made a series would show in any round
        await anonymous_round()
    after = (await scrape(admin)).samples.keys()
    assert after - before == set()


async def test_past_its_cap_a_family_lumps_new_names_together(
    data: httpx.AsyncClient, admin: httpx.AsyncClient, headers: dict[str, str], ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authenticated tenants may still name many queues: each family keeps at most
    MAX_SERIES_PER_FAMILY series per process, and counts the rest under "(overflow)"."""
    made = recording._made[id(PUBLISH_QUEUE_JOBS)]
    monkeypatch.setattr(recording, "MAX_SERIES_PER_FAMILY", made + 3)
    before = await scrape(admin)
    for i in range(10):
        await publish(data, f"/api/{ns}/q{i}", headers)
    after = await scrape(admin)
    name = redis_metric("publish_queue_jobs")
    mine = {
        queue: after.grew(before, name, pool="default", namespace=namespace, queue=queue)
        for namespace, queue in [*((ns, f"q{i}") for i in range(10)), ("(overflow)", "(overflow)")]
    }
    assert mine == {"q0": 1, "q1": 1, "q2": 1, **{f"q{i}": 0 for i in range(3, 10)}, "(overflow)": 7}


async def test_a_purged_namespace_reads_zero(runtime: Runtime, admin: httpx.AsyncClient, ns: str) -> None:
    engine = runtime.pools.get("default")
    await engine.publish(ns, "q", NewJob(b"job"))
    assert runtime.collector is not None
    await runtime.collector.refresh()
    labels = {"pool": "default", "namespace": ns, "queue": "q"}
    assert (await scrape(admin)).value(redis_metric("queue_sizes"), **labels) == 1
    await engine.purge_namespace(ns)
    await runtime.collector.refresh()
    assert (await scrape(admin)).value(redis_metric("queue_sizes"), **labels) == 0


async def test_the_collector_refreshes_in_the_background_and_stops(pool_config: PoolConfig, ns: str) -> None:
    runtime = await Runtime.start(Config(pools={"default": pool_config}), run_pumps=False)
    collector = metrics.Collector(runtime.pools, every_s=0.02)
    try:
        await runtime.pools.get("default").publish(ns, "q", NewJob(b"job"))
        collector.start()
        labels = {"pool": "default", "namespace": ns, "queue": "q"}
        deadline = time.monotonic() + 3
        while Scrape(metrics.exposition().decode()).value(redis_metric("queue_sizes"), **labels) != 1:
            assert time.monotonic() < deadline, "the collector never refreshed"
            await asyncio.sleep(0.02)
        started = time.monotonic()
        await collector.stop()
        assert time.monotonic() - started < tasks.STOP_GRACE_S
    finally:
        await collector.stop()
        await runtime.stop()


async def test_only_one_collector_of_a_server_collects_at_a_time(pool_config: PoolConfig) -> None:
    """Workers share the metrics directory: the lock file lets one of them collect, and another
    take over when it stops."""
    runtime = await Runtime.start(Config(pools={"default": pool_config}), run_pumps=False)
    first, second = metrics.Collector(runtime.pools), metrics.Collector(runtime.pools)
    try:
        assert first._holds_lock()
        assert not second._holds_lock()
        await first.stop()
        assert second._holds_lock()
    finally:
        await first.stop()
        await second.stop()
        await runtime.stop()


# -- a real server with two workers ----------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    # The server makes its metrics directory in TMPDIR: here, where the test can look.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    with Server(tmp_path) as made:
        yield made


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _writer_pids(tmp: Path) -> set[str]:
    return {path.stem.rsplit("_", 1)[1] for path in tmp.glob(f"{metrics.DIR_PREFIX}*/counter_*.db")}


def test_only_the_metrics_directories_of_dead_servers_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead, live = f"{metrics.DIR_PREFIX}{dead_pid()}", f"{metrics.DIR_PREFIX}{os.getpid()}"
    for name in (f"{dead}-killed", f"{dead}-elsewhere", f"{live}-running"):
        (tmp_path / name).mkdir()
    # Locked: a live server in another pid namespace sharing this directory, whose pid we cannot see.
    held = multiproc._flocked_directory(str(tmp_path / f"{dead}-elsewhere"))
    try:
        multiproc._remove_stale_directories()
    finally:
        assert held is not None
        os.close(held)
    assert {path.name for path in tmp_path.iterdir()} == {f"{dead}-elsewhere", f"{live}-running"}


def test_every_scrape_of_two_workers_adds_up_both(server: Server, tmp_path: Path) -> None:
    # What a server killed with -9 leaves behind: removed by the next one to start.
    stale = tmp_path / "tmp" / f"{metrics.DIR_PREFIX}{dead_pid()}-old"
    stale.mkdir()
    server.start("--workers", "2")
    assert not stale.exists()
    token = httpx.post(f"{server.admin_url}/token/mp", params={"description": "e2e"}).json()["token"]
    published = 0
    # A fresh connection per publish, until both workers have taken some (the kernel picks).
    while len(_writer_pids(tmp_path / "tmp")) < 2 or published < 10:
        assert published < 500, "one worker took every connection"
        with httpx.Client(base_url=server.data_url, timeout=5) as client:
            assert client.put("/api/mp/q", params={"token": token}, content=b"x").status_code == 201
        published += 1
    # Each worker writes what it counted every FLUSH_S (metrics/pending.py): after that, any scrape is whole.
    time.sleep(metrics.FLUSH_S + FLUSH_LATE_S)
    for _ in range(6):  # whichever worker answers, it reports the whole server
        with httpx.Client(base_url=server.admin_url, timeout=5) as client:
            scraped = Scrape(client.get("/metrics").text)
        labels = {"pool": "default", "namespace": "mp", "queue": "q"}
        assert scraped.value(redis_metric("publish_queue_jobs"), **labels) == published
        assert scraped.value(redis_metric("publish_jobs"), pool="default") == published
        codes = {"pool": "default", "namespace": "mp", "api": "/api/:namespace/:queue", "method": "PUT", "code": "201"}
        assert scraped.value("infra_lmstfy_http_http_codes", **codes) == published
    server.signal(signal.SIGTERM)
    assert server.wait(10) == 0, server.stderr()
    assert not list((tmp_path / "tmp").glob(f"{metrics.DIR_PREFIX}*")), "the metrics directory outlived the server"


FIRST_COUNTS_OF_A_PROCESS = """
from lmstfy_py import metrics, tasks
from lmstfy_py.metrics.recording import EngineMetrics
from lmstfy_py.types import NewJob

EngineMetrics().published("default", "ns", "q", [NewJob(b"x")], None)
tasks._count_restart("wake")
metrics.flush()
print(metrics.exposition().decode())
"""


def test_what_a_process_counts_before_anything_else_is_scraped(tmp_path: Path) -> None:
    # A process embedding the engine (or a test) never called server.run's new_directory: its first
    # count once made a series in memory, which no scrape ever saw (test order made suites flaky).
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop(multiproc.ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", FIRST_COUNTS_OF_A_PROCESS],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    scrape = Scrape(done.stdout)
    assert scrape.value(redis_metric("queue_direct_push_jobs"), pool="default") == 1
    assert scrape.value("lmstfy_background_restarts_total", loop="wake") == 1
