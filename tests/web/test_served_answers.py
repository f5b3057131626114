"""Answers a newcomer met in their first hour, asked of a real `lmstfy-py serve` process:
which of several faults a 400 names, and what ttr=0 means on consume and on touch."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token
from benchmarks.harness.redis_servers import RedisProcess

PUMP_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def server(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    redis_server.start()
    with Server(tmp_path_factory.mktemp("answers"), redis_url=redis_server.url, args=["--workers", "1"]) as running:
        yield running.start()


def refusal(response: httpx.Response) -> tuple[int, object]:
    return response.status_code, response.json()


# -- POST /token/{ns}: the namespace first ----------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "error"),
    [("bad.ns", "namespace name contains forbidden characters"), ("n" * 256, "the namespace name was too long")],
)
def test_a_bad_namespace_is_named_before_a_missing_description(server: Server, ns: str, error: str) -> None:
    response = httpx.post(f"{server.admin_url}/token/{ns}", timeout=5)
    assert refusal(response) == (400, {"error": error})
    short = httpx.post(f"{server.admin_url}/token/{ns}", params={"token": "short"}, timeout=5)
    assert refusal(short) == (400, {"error": error})


def test_a_good_namespace_without_a_description_is_still_refused_for_it(server: Server) -> None:
    response = httpx.post(f"{server.admin_url}/token/good-ns", timeout=5)
    assert refusal(response) == (400, {"error": "invalid description"})


# -- backoff: each value's form before the rules between them ---------------------------------


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"backoff_max_ms": "abc"}, "invalid backoff_max_ms"),
        ({"backoff_ms": "abc"}, "invalid backoff_ms"),
        ({"backoff_ms": "0"}, "invalid backoff_ms"),
        ({"backoff_ms": "10", "backoff_max_ms": "-1"}, "invalid backoff_max_ms"),
        ({"backoff": "linear", "backoff_ms": "abc"}, "invalid backoff"),
        ({"backoff_ms": "10"}, "backoff_ms needs backoff=exponential"),
        ({"backoff_max_ms": "10"}, "backoff_max_ms needs backoff=exponential"),
        ({"backoff": "exponential", "backoff_ms": "500", "backoff_max_ms": "x"}, "invalid backoff_max_ms"),
        (
            {"backoff": "exponential", "backoff_ms": "500", "backoff_max_ms": "100"},
            "backoff_max_ms is smaller than backoff_ms",
        ),
        ({"unique_for": "10", "priority": "high"}, "invalid priority"),
    ],
)
def test_a_malformed_value_is_named_before_any_rule_between_values(
    server: Server, query: dict[str, str], error: str
) -> None:
    token = create_token(server, "answers")
    response = httpx.put(f"{server.data_url}/api/answers/q", params={"token": token, **query}, content=b"x", timeout=5)
    assert refusal(response) == (400, {"error": error})


# -- ttr=0 -------------------------------------------------------------------------------------


def _consume(server: Server, token: str, **query: object) -> httpx.Response:
    return httpx.get(f"{server.data_url}/api/ttr0/q", params={"token": token, **query}, timeout=10)


def test_consume_ttr_0_is_lmstfys_reservation_that_ends_at_once(server: Server) -> None:
    """Accepted, as lmstfy does: the job is handed out and, unACKed, comes back (or dies) at once."""
    token = create_token(server, "ttr0")
    published = httpx.put(f"{server.data_url}/api/ttr0/q", params={"token": token, "tries": 2}, content=b"x")
    job_id = published.json()["job_id"]

    first = _consume(server, token, ttr=0, timeout=2)
    assert (first.status_code, first.json()["job_id"], first.json()["remain_tries"]) == (200, job_id, 1)
    started = time.monotonic()
    again = _consume(server, token, ttr=0, timeout=5)  # no waiting out a ttr: back within the pump's tick
    assert (again.status_code, again.json()["job_id"], again.json()["remain_tries"]) == (200, job_id, 0)
    assert time.monotonic() - started < 3.0

    # Its last try: it goes to the dead letter as soon as the reservation ends, which is now.
    deadline = time.monotonic() + PUMP_TIMEOUT
    while httpx.get(f"{server.data_url}/api/ttr0/q/deadletter/size", params={"token": token}).json()["size"] != 1:
        assert time.monotonic() < deadline, "the job never reached the dead letter"
        time.sleep(0.05)


def test_touch_refuses_ttr_0_where_consume_takes_it(server: Server) -> None:
    """A touch extends a reservation: ttr 0 would end it, which is what release is for."""
    token = create_token(server, "ttr0")
    httpx.put(f"{server.data_url}/api/ttr0/q", params={"token": token}, content=b"x")
    job_id = _consume(server, token, ttr=60, timeout=2).json()["job_id"]
    for query in ({"ttr": 0}, {"ttr_ms": 0}):
        touched = httpx.put(f"{server.data_url}/api/ttr0/q/job/{job_id}/touch", params={"token": token, **query})
        assert refusal(touched) == (400, {"error": "invalid ttr"})
    state = httpx.get(f"{server.data_url}/api/ttr0/q/job/{job_id}", params={"token": token}).json()
    assert state["state"] == "reserved"
