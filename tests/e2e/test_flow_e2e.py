"""SPEC 14 over HTTP on one real `lmstfy-py serve` with two worker processes per HTTP server: the flow
settings through the served app, max_reserved holding across processes with a held long-poll woken by
an ACK, a rate's burst and then its pace, groups (order, concurrency, another group meanwhile, a release
to the front, fairness among the next 2), promote, and the stats' delay horizon."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token, wait_until
from tests.conftest import EVERY_HTTP_SERVER

HTTP_SERVERS = EVERY_HTTP_SERVER
NS = "flow"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, http_server: str) -> Iterator[Server]:
    tmp_path = tmp_path_factory.mktemp("flow")
    started = Server(tmp_path, http_server=http_server)
    try:
        yield started.start("--workers", "2")  # limits hold across processes: the reserve step decides
    finally:
        started.cleanup()


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return create_token(server, NS)


@pytest.fixture
def client(server: Server, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{server.data_url}/api/{NS}", params={"token": token}, timeout=20) as made:
        yield made


def settings(client: httpx.Client, queue: str, **changes: Any) -> dict[str, Any]:
    response = client.put(f"/{queue}/settings", params=changes)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def publish(client: httpx.Client, queue: str, body: bytes = b"x", **query: Any) -> str:
    response = client.put(f"/{queue}", params=query, content=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def publish_many(client: httpx.Client, queue: str, count: int, **query: Any) -> list[str]:
    job_ids: list[str] = []
    while len(job_ids) < count:
        bodies = "[" + ",".join(str(n) for n in range(len(job_ids), min(count, len(job_ids) + 64))) + "]"
        response = client.put(f"/{queue}/bulk", params=query, content=bodies.encode())
        assert response.status_code == 201, response.text
        job_ids += response.json()["job_ids"]
    return job_ids


def consume(client: httpx.Client, queue: str, **query: Any) -> str | None:
    """The id of the job delivered, None for 404 no job available."""
    response = client.get(f"/{queue}", params={"timeout": 0, **query})
    if response.status_code == 404:
        assert response.json() == {"msg": "no job available"}
        return None
    assert response.status_code == 200, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def consume_many(client: httpx.Client, queue: str, count: int) -> list[str]:
    response = client.get(f"/{queue}", params={"timeout": 0, "count": count})
    assert response.status_code == 200, response.text
    return [job["job_id"] for job in response.json()]


def ack(client: httpx.Client, queue: str, job_id: str) -> None:
    assert client.delete(f"/{queue}/job/{job_id}").status_code == 204


class Waiters:
    """Long-poll consumes on their own connections (spread over the server's processes), each answer
    kept with when it came."""

    def __init__(self, client: httpx.Client, queue: str, count: int, timeout: int) -> None:
        self.answers: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        url = str(client.base_url.join(queue))  # httpx's base_url ends with "/"
        query = {**client.params, "timeout": timeout}
        self.threads = [threading.Thread(target=self._wait, args=(url, query, timeout)) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _wait(self, url: str, query: dict[str, Any], timeout: int) -> None:
        with httpx.Client(timeout=timeout + 10) as own:
            response = own.get(url, params=query)
        with self._lock:
            self.answers.append((time.monotonic(), {"status": response.status_code, **response.json()}))

    def delivered(self) -> list[tuple[float, str]]:
        with self._lock:
            return [(at, answer["job_id"]) for at, answer in self.answers if answer["status"] == 200]

    def join(self) -> list[tuple[int, str]]:
        """Each answer's status and message, sorted."""
        for thread in self.threads:
            thread.join(30)
        return sorted((answer["status"], answer["msg"]) for _, answer in self.answers)


def test_settings_through_the_served_app(client: httpx.Client) -> None:
    shown = settings(client, "s", max_reserved=5, rate="0.5", burst=3, group_concurrency=4)
    assert shown == {
        "namespace": NS,
        "queue": "s",
        "keep": 0,
        "events": 0,
        "max_reserved": 5,
        "rate": 0.5,
        "burst": 3,
        "group_concurrency": 4,
    }
    refused = client.put("/s/settings", params={"rate": "10", "burst": "0"})
    assert (refused.status_code, refused.json()) == (400, {"error": "invalid burst"})
    assert client.get("/s/settings").json() == shown
    changed = settings(client, "s", rate="10", burst="")
    assert (changed["rate"], changed["burst"]) == (10, None)
    bad_group = client.put("/s", params={"group": "b@d"}, content=b"x")  # the lean dispatcher's publish
    assert (bad_group.status_code, bad_group.json()) == (400, {"error": "invalid group"})


def test_max_reserved_holds_across_processes_and_an_ack_wakes_a_held_consume(client: httpx.Client) -> None:
    settings(client, "mr", max_reserved=3)
    publish_many(client, "mr", 10)
    reserved = consume_many(client, "mr", 5)
    assert len(reserved) == 3  # count=5 gets the free slots only
    waiters = Waiters(client, "mr", 6, timeout=3)
    time.sleep(0.5)
    assert waiters.delivered() == []  # held: each waits within its timeout
    acked_at = time.monotonic()
    ack(client, "mr", reserved[0])
    assert wait_until(lambda: len(waiters.delivered()) == 1, 3)
    woken_at, _ = waiters.delivered()[0]
    assert woken_at - acked_at < 1.5  # woken by the ACK, not by its timeout over 2 s away
    time.sleep(0.3)
    assert len(waiters.delivered()) == 1  # one slot freed, one job went
    assert waiters.join() == [(200, "new job")] + [(404, "no job available")] * 5
    assert client.get("/mr/stats").json()["reserved"] == 3


def test_a_rate_delivers_its_burst_at_once_then_at_its_pace(client: httpx.Client) -> None:
    settings(client, "rt", rate="2", burst=2)
    publish_many(client, "rt", 4)
    started = time.monotonic()
    assert len(consume_many(client, "rt", 4)) == 2  # the whole tokens there: the burst
    assert consume(client, "rt") is None  # no token left
    other = publish(client, "rt2")
    assert consume(client, "rt,rt2") == other  # a multi-queue consume takes from the others meanwhile
    assert consume(client, "rt", timeout=3) is not None  # held until the next token, 500 ms on
    assert 0.4 <= time.monotonic() - started < 2.0


def test_groups_go_in_order_one_at_a_time_while_other_groups_go(client: httpx.Client) -> None:
    a1, a2, a3 = (publish(client, "gq", group="A", tries=3) for _ in range(3))
    b1 = publish(client, "gq", group="B")
    # A's first job, and while it holds A's one slot, B's: A's others wait.
    assert {consume(client, "gq"), consume(client, "gq")} == {a1, b1}
    assert consume(client, "gq") is None
    ack(client, "gq", a1)
    assert consume(client, "gq") == a2
    assert client.put(f"/gq/job/{a2}/release").json()["msg"] == "released"
    assert consume(client, "gq") == a2  # a release puts it back at the front of its group
    assert client.get(f"/gq/job/{a2}").json()["group"] == "A"
    ack(client, "gq", a2)
    assert consume(client, "gq") == a3


def test_a_busy_group_does_not_starve_one_published_later(client: httpx.Client) -> None:
    settings(client, "fq", group_concurrency=65535)
    publish_many(client, "fq", 300, group="A")
    for _ in range(5):
        assert consume(client, "fq") is not None  # group A alone: its jobs go
    b1 = publish(client, "fq", group="B")
    assert b1 in [consume(client, "fq"), consume(client, "fq")]
    plain = publish(client, "fq")  # jobs without a group share one turn of the ring
    assert plain in consume_many(client, "fq", 2)
    assert client.get("/fq/stats").json()["ready"] == 300 - 7


def test_promote_and_the_delay_horizon(client: httpx.Client) -> None:
    before = time.time_ns() // 1_000_000
    ready = publish(client, "dh")
    delayed = [publish(client, "dh", delay=delay, ttl=0) for delay in (30, 1800, 5 * 3600, 3 * 86400)]
    stats = client.get("/dh/stats").json()
    assert before <= stats["oldest_ready_ms"] <= time.time_ns() // 1_000_000
    assert (stats["delayed"], stats["due"]) == (4, {"1m": 1, "1h": 1, "1d": 1, "later": 1})
    response = client.put(f"/dh/job/{delayed[3]}/promote")
    assert (response.status_code, response.json()) == (200, {"msg": "promoted"})
    assert client.get("/dh/stats").json()["due"] == {"1m": 1, "1h": 1, "1d": 1, "later": 0}
    assert consume(client, "dh") == ready
    assert consume(client, "dh") == delayed[3]
    for job_id, answer in (
        (ready, (409, {"error": "job is not delayed"})),
        ("no-such-job", (404, {"error": "job not found"})),
    ):
        response = client.put(f"/dh/job/{job_id}/promote")
        assert (response.status_code, response.json()) == answer
    assert client.get("/dh/stats").json()["oldest_ready_ms"] is None
