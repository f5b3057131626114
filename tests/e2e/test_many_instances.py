"""Two real `lmstfy-py serve` instances on one Redis behave as one server.

Instance A runs one worker, instance B two (`--workers 2`): three processes, each with its
own timer pump, token cache and limit cache. Jobs published on either are delivered once
by either; an expired reservation is handled once; a token or limit change made on one
instance applies on every process of the other within a second.

Consumers hold one TCP connection each (benchmarks/loadclient.py), so N consumers are N
concurrent long-polls spread over the processes. Admin changes are checked with a fresh
connection per request, so that both workers of B are asked.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from benchmarks.harness.lmstfy_servers import QUEUE, Server, create_token, started_together
from benchmarks.harness.redis_servers import RedisProcess
from benchmarks.loadclient import Connection
from lmstfy_py.store import keys

PROPAGATION_S = 1.2  # the promise is 1 s; the margin covers one poll and a request
WATCH_S = 1.6  # how long a change is watched: past PROPAGATION_S, to catch a process flapping back
POLL_S = 0.05
DELIVERY_TIMEOUT_S = 10.0

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def shared_redis(redis_server: RedisProcess) -> str:
    # Module-scoped (redis_url is per test): starting three server processes is most of
    # this file's time, so the tests share them, each in its own namespace.
    redis_server.start()
    redis_server.flushall()
    return redis_server.url


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, shared_redis: str) -> Iterator[tuple[Server, Server]]:
    tmp_path = tmp_path_factory.mktemp("many")
    servers = [Server(tmp_path, redis_url=shared_redis, args=["--workers", str(workers)]) for workers in (1, 2)]
    with started_together(servers) as started:
        yield started[0], started[1]


@pytest.fixture
def ns() -> str:
    return f"many{next(_namespaces)}"


@pytest.fixture
def store(shared_redis: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(shared_redis)
    yield client
    client.close()


# -- helpers --------------------------------------------------------------------------


def connect(server: Server) -> Connection:
    return Connection("127.0.0.1", server.port)


async def publish(conn: Connection, ns: str, token: str, body: bytes, **options: int) -> str:
    answer = await conn.request("PUT", f"/api/{ns}/{QUEUE}", {"token": token, **options}, body)
    assert answer.status == 201, answer.body
    job_id: str = answer.json()["job_id"]
    return job_id


async def publish_all(conn: Connection, ns: str, token: str, delays: dict[int, int]) -> dict[str, int]:
    """Publishes job i (body "i") with delay_ms delays[i]; returns job id -> delay."""
    published = {}
    for i, delay_ms in delays.items():
        published[await publish(conn, ns, token, str(i).encode(), delay_ms=delay_ms)] = delay_ms
    await conn.close()
    return published


async def consume_until(
    conn: Connection, ns: str, token: str, done: asyncio.Event, delivered: list[dict[str, Any]], ack: bool, **ttr: int
) -> None:
    """Long-polls until `done`, recording every job delivered (and ACKing it if `ack`)."""
    while not done.is_set():
        answer = await conn.request("GET", f"/api/{ns}/{QUEUE}", {"token": token, "timeout": 1, **ttr})
        if answer.status == 404:
            continue
        assert answer.status == 200, answer.body
        job = answer.json()
        delivered.append(job)
        if ack:
            acked = await conn.request("DELETE", f"/api/{ns}/{QUEUE}/job/{job['job_id']}", {"token": token})
            assert acked.status == 204, acked.body
    await conn.close()


async def wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not done within {timeout:g}s"
        await asyncio.sleep(POLL_S)


def last_stale_s(ask: Callable[[], int], fresh: int) -> float:
    """Asks every POLL_S for WATCH_S; returns when a request last got an answer not `fresh` (0 if never)."""
    started = last_stale = time.monotonic()
    while (asked := time.monotonic()) - started < WATCH_S:
        if ask() != fresh:
            last_stale = asked  # when the request was sent: a slow answer is not a stale cache
        time.sleep(POLL_S)
    return last_stale - started


def publisher(servers: tuple[Server, ...], ns: str, token: str) -> Callable[[], int]:
    """Publishes on each server in turn, each time on a new connection (any worker may take it)."""
    turns = itertools.cycle(servers)

    def publish_once() -> int:
        response = httpx.put(f"{next(turns).data_url}/api/{ns}/{QUEUE}", params={"token": token}, content=b"x")
        assert response.status_code in (201, 401, 429), response.text
        return response.status_code

    return publish_once


def dead_ids(store: redis.Redis, ns: str) -> list[str]:
    return sorted(keys.unpack_element(element)[1] for element in store.lrange(keys.dead(ns, QUEUE), 0, -1))


# -- jobs -----------------------------------------------------------------------------


async def test_jobs_published_and_consumed_on_both_instances_are_delivered_once_and_never_early(
    pair: tuple[Server, Server], ns: str, store: redis.Redis
) -> None:
    a, b = pair
    token = create_token(a, ns)
    random.seed(5)
    # A third ready at once, the rest due over 1.5 s: every process's pump has timers to move.
    delays = {i: 0 if i % 3 == 0 else random.randint(200, 1500) for i in range(300)}
    delivered: list[dict[str, Any]] = []
    done = asyncio.Event()
    consumers = [
        asyncio.create_task(consume_until(connect(server), ns, token, done, delivered, ack=True, ttr=60))
        for server in (a, b) * 12
    ]
    publishers = [  # 8 publishers, alternately on A and B
        publish_all(connect((a, b)[k % 2]), ns, token, {i: d for i, d in delays.items() if i % 8 == k})
        for k in range(8)
    ]
    published: dict[str, int] = {}
    for part in await asyncio.gather(*publishers):
        published.update(part)

    try:
        await wait_for(lambda: len({job["job_id"] for job in delivered}) >= len(published), DELIVERY_TIMEOUT_S)
    finally:
        done.set()  # consumers still polling go on for up to a second: a second delivery would show
        await asyncio.gather(*consumers)

    assert Counter(job["job_id"] for job in delivered) == Counter(list(published))  # each exactly once
    early = [job for job in delivered if job["elapsed_ms"] < published[job["job_id"]]]
    assert early == []
    assert sorted(int(base64.b64decode(job["data"])) for job in delivered) == list(range(300))
    assert list(store.scan_iter(match=keys.job_prefix(ns) + "*")) == []
    assert store.zcard(keys.timer(ns)) == store.llen(keys.ready(ns, QUEUE)) == 0


async def test_an_expired_reservation_is_redelivered_once_then_dead_once(
    pair: tuple[Server, Server], ns: str, store: redis.Redis
) -> None:
    a, b = pair
    token = create_token(a, ns)
    on_a, on_b = connect(a), connect(b)
    ids = [await publish((on_a, on_b)[i % 2], ns, token, b"x", tries=2) for i in range(30)]
    first = []
    for _ in ids:  # reserved on A for 300 ms, never ACKed
        answer = await on_a.request("GET", f"/api/{ns}/{QUEUE}", {"token": token, "ttr_ms": 300})
        assert answer.status == 200, answer.body
        first.append(answer.json())
    assert sorted(job["job_id"] for job in first) == sorted(ids)
    assert {job["remain_tries"] for job in first} == {1}

    redelivered: list[dict[str, Any]] = []
    done = asyncio.Event()
    consumers = [
        asyncio.create_task(consume_until(connect(server), ns, token, done, redelivered, ack=False, ttr_ms=300))
        for server in (a, b) * 4
    ]
    try:
        await wait_for(lambda: store.llen(keys.dead(ns, QUEUE)) >= len(ids), DELIVERY_TIMEOUT_S)
        await asyncio.sleep(0.4)  # past another ttr: nothing may come back once dead
    finally:
        done.set()
        await asyncio.gather(*consumers, on_a.close(), on_b.close())

    assert Counter(job["job_id"] for job in redelivered) == Counter(ids)  # each exactly once more
    assert {job["remain_tries"] for job in redelivered} == {0}
    assert dead_ids(store, ns) == sorted(ids)  # each dead exactly once
    size = httpx.get(f"{b.data_url}/api/{ns}/{QUEUE}/deadletter/size").json()["size"]
    assert size == len(ids)
    assert store.zcard(keys.timer(ns)) == store.llen(keys.ready(ns, QUEUE)) == 0


# -- tokens and limits ----------------------------------------------------------------


def test_a_token_made_on_one_instance_works_on_the_other_at_once_and_its_deletion_within_a_second(
    pair: tuple[Server, Server], ns: str
) -> None:
    a, b = pair
    token = create_token(a, ns)
    publish_on_b = publisher((b,), ns, token)
    # At once on B (no process of B has asked before), and now cached by B's workers.
    assert [publish_on_b() for _ in range(10)] == [201] * 10

    assert httpx.delete(f"{a.admin_url}/token/{ns}/{token}").status_code == 204
    assert last_stale_s(publish_on_b, fresh=401) < PROPAGATION_S


def test_a_namespace_deleted_on_one_instance_refuses_its_tokens_on_the_other_within_a_second(
    pair: tuple[Server, Server], ns: str
) -> None:
    a, b = pair
    tokens = [create_token(a, ns), create_token(b, ns)]
    publishes = itertools.cycle([publisher((a,), ns, token) for token in tokens])
    assert [next(publishes)() for _ in range(6)] == [201] * 6  # both cached by A

    deleted = httpx.delete(f"{b.admin_url}/namespaces/{ns}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["tokens_deleted"] == 2
    assert last_stale_s(lambda: next(publishes)(), fresh=401) < PROPAGATION_S


def test_a_limit_set_and_deleted_on_the_two_worker_instance_applies_on_every_process_within_a_second(
    pair: tuple[Server, Server], ns: str
) -> None:
    a, b = pair
    token = create_token(a, ns)
    publish_anywhere = publisher((a, b), ns, token)
    assert [publish_anywhere() for _ in range(6)] == [201] * 6  # no limit yet

    # One publish per hour: the first process that knows takes the unit (201), then all say 429.
    limit = httpx.post(f"{b.admin_url}/token/{ns}/{token}/limit", json={"read": 0, "write": 1, "interval": 3600})
    assert limit.status_code == 201, limit.text
    assert last_stale_s(publish_anywhere, fresh=429) < PROPAGATION_S

    assert httpx.delete(f"{b.admin_url}/token/{ns}/{token}/limit").status_code == 200
    assert last_stale_s(publish_anywhere, fresh=201) < PROPAGATION_S
