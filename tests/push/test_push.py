"""Push delivery (SPEC section 8) on a real Runtime (the server's process minus its HTTP server) and
real endpoints (tests/fixtures/push_endpoints.py): lmstfy's pusher API, what is POSTed, ACK on 2xx, retries,
backoff, max_attempts, signatures, pause. Server processes: tests/e2e/test_push_e2e.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from lmstfy_py import metrics
from lmstfy_py.runtime import Runtime
from lmstfy_py.types import NewJob, TraceContext
from lmstfy_py.web import create_admin_app
from tests.conftest import client_for, eventually
from tests.fixtures.push_endpoints import Endpoints, refused_url
from tests.metrics.test_metrics import Scrape

NS = "push"
SECRET = "s3cret-s3cret-s3cret"


@pytest.fixture
async def runtime(standalone_runtime: Runtime) -> Runtime:
    return standalone_runtime


@pytest.fixture
async def admin(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_admin_app(runtime)) as client:
        yield client


@pytest.fixture
async def endpoints() -> AsyncIterator[Endpoints]:
    async with Endpoints() as running:
        yield running


def pusher(endpoint: str, *queues: str, **more: Any) -> dict[str, Any]:
    return {"queues": list(queues or ["q"]), "endpoint": endpoint, "workers": 4, "timeout": 1, **more}


async def publish(runtime: Runtime, queue: str = "q", body: bytes = b"hello", **job: Any) -> str:
    return (await runtime.pools.get("default").publish(NS, queue, NewJob(body, **job))).job_id


# -- lmstfy's pusher API ---------------------------------------------------------------------------


async def test_the_pusher_api_answers_as_lmstfys(admin: httpx.AsyncClient, endpoints: Endpoints) -> None:
    body = pusher(endpoints.url("/ok"), "high", "low")
    created = await admin.post(f"/pusher/{NS}/orders", json=body)
    assert (created.status_code, created.json()) == (201, {"status": "created"})
    duplicate = await admin.post(f"/pusher/{NS}/orders", json=body)
    assert (duplicate.status_code, duplicate.json()) == (409, {"error": "the meta key has already exists"})
    shown = {"queues": ["high", "low"], "endpoint": endpoints.url("/ok"), "workers": 4, "timeout": 1, "signed": False}
    assert (await admin.get(f"/pusher/{NS}/orders")).json() == {"pusher": shown}
    assert (await admin.get(f"/pusher/{NS}", params={"pool": "default"})).json() == {"pushers": {"orders": shown}}
    assert (await admin.get("/pushers")).json() == {"pushers": {"default": {NS: ["orders"]}}}
    # lmstfy's PUT: what is given (and not zero) replaces; the rest stays.
    updated = await admin.put(f"/pusher/{NS}/orders", json={"workers": 8})
    assert (updated.status_code, updated.json()) == (200, {"status": "ok"})
    assert (await admin.get(f"/pusher/{NS}/orders")).json()["pusher"] == {**shown, "workers": 8}
    deleted = await admin.delete(f"/pusher/{NS}/orders")
    assert (deleted.status_code, deleted.json()) == (200, {"status": "deleted"})
    for method, error in (
        ("GET", "pusher was not found"),
        ("PUT", "the pusher was not found"),
        ("DELETE", "the meta key was not found"),
    ):
        answer = await admin.request(method, f"/pusher/{NS}/orders", json={"workers": 1})
        assert (answer.status_code, answer.json()) == (404, {"error": error}), method


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"workers": 0}, "workers should be between 1 and 64"),
        ({"workers": 65}, "workers should be between 1 and 64"),
        ({"workers": "4"}, "workers should be an integer"),
        ({"timeout": 0}, "timeout should be between 1 and 3600"),
        ({"timeout": 3601}, "timeout should be between 1 and 3600"),
        ({"endpoint": "not a url"}, 'parse "not a url": invalid URI for request'),
        ({"endpoint": "ftp://example.com/x"}, "the endpoint should be an http:// or https:// URL"),
        ({"queues": []}, "queues should be between 1 and 16"),
        ({"queues": [f"q{i}" for i in range(17)]}, "queues should be between 1 and 16"),
        ({"queues": ["_hidden"]}, "invalid queue name: '_hidden'"),
        ({"secret": "too short"}, "secret should be a string of at least 16 bytes"),
        ({"backoff": "linear"}, 'backoff should be "fixed" or "exponential"'),
        ({"max_attempts": -1}, "max_attempts should not be negative"),
    ],
)
async def test_a_bad_pusher_is_refused_with_400(
    admin: httpx.AsyncClient, endpoints: Endpoints, change: dict[str, Any], error: str
) -> None:
    answer = await admin.post(f"/pusher/{NS}/bad", json={**pusher(endpoints.url("/ok")), **change})
    assert (answer.status_code, answer.json()) == (400, {"error": error})
    assert (await admin.get(f"/pusher/{NS}/bad")).status_code == 404


async def test_a_body_that_is_not_json_is_refused(admin: httpx.AsyncClient) -> None:
    answer = await admin.post(f"/pusher/{NS}/bad", content=b"{nope")
    assert answer.status_code == 400 and answer.json()["error"].startswith("invalid JSON")


# -- delivery ------------------------------------------------------------------------------------


async def test_each_job_is_posted_as_lmstfy_posts_it_and_acked_on_2xx(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/ok")))).status_code == 201
    job_id = await publish(runtime, body=b"\x00binary\xff", ttl_ms=60_000)
    await eventually(lambda: endpoints.received)
    [got] = endpoints.received
    assert got.headers["Content-Type"] == "application/json"
    assert (got.headers["X-Lmstfy-Job-Id"], got.headers["X-Lmstfy-Attempt"]) == (job_id, "1")
    assert "X-Lmstfy-Signature" not in got.headers
    job = got.job
    assert set(job) == {"namespace", "queue", "id", "ttl", "elapsed_ms", "body"}
    assert (job["namespace"], job["queue"], job["id"]) == (NS, "q", job_id)
    assert base64.b64decode(job["body"]) == b"\x00binary\xff"
    assert 55 <= job["ttl"] <= 60 and 0 <= job["elapsed_ms"] < 5000
    store = runtime.pools.get("default")

    async def gone() -> bool:
        try:
            await store.peek_job(NS, "q", job_id)
        except Exception:
            return True
        return False

    deadline = time.monotonic() + 3
    while not await gone():
        assert time.monotonic() < deadline, "the job was not ACKed"
        await asyncio.sleep(0.02)


async def test_the_first_queue_of_a_group_wins(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    for i in range(3):
        await publish(runtime, "low", b"low %d" % i)
        await publish(runtime, "high", b"high %d" % i)
    body = pusher(endpoints.url("/ok"), "high", "low", workers=1)
    assert (await admin.post(f"/pusher/{NS}/g", json=body)).status_code == 201
    await eventually(lambda: len(endpoints.received) == 6)
    assert [r.job["queue"] for r in endpoints.received] == ["high"] * 3 + ["low"] * 3


async def test_a_failing_endpoint_gets_the_job_again_after_the_groups_backoff(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    body = pusher(endpoints.url("/fail/3"), backoff="exponential", backoff_ms=200, backoff_max_ms=10_000)
    assert (await admin.post(f"/pusher/{NS}/g", json=body)).status_code == 201
    job_id = await publish(runtime, tries=1)  # push retries use up no try (lmstfy's)
    await eventually(lambda: len(endpoints.received) == 4, timeout=8)
    times = [r.at for r in endpoints.received]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert [r.headers["X-Lmstfy-Attempt"] for r in endpoints.received] == ["1", "2", "3", "4"]
    assert [r.job["id"] for r in endpoints.received] == [job_id] * 4
    # 200, 400, 800 ms after each failure (the pump moves a job within milliseconds of its due time).
    for gap, expected in zip(gaps, (0.2, 0.4, 0.8), strict=True):
        assert expected <= gap < expected + 0.5, gaps
    deadline = time.monotonic() + 3
    while not await job_is_gone(runtime, job_id):  # ACKed after the 200
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def job_is_gone(runtime: Runtime, job_id: str) -> bool:
    try:
        await runtime.pools.get("default").peek_job(NS, "q", job_id)
    except Exception:
        return True
    return False


async def test_without_backoff_a_failed_job_comes_back_after_the_timeout(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/fail/1")))).status_code == 201
    await publish(runtime)
    await eventually(lambda: len(endpoints.received) == 2, timeout=5)
    first, second = endpoints.received
    assert 1.0 <= second.at - first.at < 1.6  # timeout = 1 s, as lmstfy's ttr


async def test_past_max_attempts_a_job_goes_to_the_dead_letter_with_the_last_status(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    body = pusher(endpoints.url("/status/503"), max_attempts=3, backoff="exponential", backoff_ms=50)
    assert (await admin.post(f"/pusher/{NS}/g", json=body)).status_code == 201
    job_id = await publish(runtime)
    store = runtime.pools.get("default")

    async def dead() -> bool:
        return (await store.stats(NS, "q")).dead == 1

    deadline = time.monotonic() + 5
    while not await dead():
        assert time.monotonic() < deadline, "never buried"
        await asyncio.sleep(0.05)
    info = await store.peek_job(NS, "q", job_id)
    assert (info.state, info.job.attempts) == ("dead", 3)
    assert info.last_error == f"push to {endpoints.url('/status/503')}: HTTP 503"
    assert len(endpoints.received) == 3


async def test_an_endpoint_that_hangs_or_refuses_gets_the_job_again(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    for group, endpoint in (("slow", endpoints.url("/slow/3")), ("refused", refused_url())):
        body = pusher(endpoint, group, max_attempts=2, backoff="exponential", backoff_ms=50)
        assert (await admin.post(f"/pusher/{NS}/{group}", json=body)).status_code == 201
        await publish(runtime, group)
    store = runtime.pools.get("default")
    deadline = time.monotonic() + 8
    while (await store.stats(NS, "slow")).dead + (await store.stats(NS, "refused")).dead < 2:
        assert time.monotonic() < deadline, "never buried"
        await asyncio.sleep(0.1)
    slow = (await store.dead_page(NS, "slow", 10, None)).jobs[0]
    refused = (await store.dead_page(NS, "refused", 10, None)).jobs[0]
    assert (slow.attempts, slow.last_error) == (2, f"push to {endpoints.url('/slow/3')}: timeout")
    assert refused.last_error is not None and refused.last_error.endswith(": unreachable")
    assert len([r for r in endpoints.received if r.path == "/slow/3"]) == 2  # cut off after 1 s, twice


async def test_a_signed_group_signs_every_post(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    body = pusher(endpoints.url("/ok"), secret=SECRET)
    assert (await admin.post(f"/pusher/{NS}/g", json=body)).status_code == 201
    assert (await admin.get(f"/pusher/{NS}/g")).json()["pusher"]["signed"] is True
    assert SECRET not in (await admin.get(f"/pusher/{NS}/g")).text
    await publish(runtime)
    await eventually(lambda: endpoints.received)
    [got] = endpoints.received
    stamp, _, digest = got.headers["X-Lmstfy-Signature"].partition(",v1=")
    sent_ms = int(stamp.removeprefix("t="))
    assert abs(sent_ms - time.time() * 1000) < 5000
    # The documented check: HMAC-SHA256 of "<t>.<body>" keyed by the secret, in hex.
    expected = hmac.new(SECRET.encode(), f"{sent_ms}.".encode() + got.raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(digest, expected)


async def test_a_secret_is_kept_by_a_put_without_one_and_dropped_by_an_empty_one(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/ok"), secret=SECRET))).status_code == 201
    assert (await admin.put(f"/pusher/{NS}/g", json={"workers": 2})).status_code == 200
    assert (await admin.get(f"/pusher/{NS}/g")).json()["pusher"]["signed"] is True
    assert (await admin.put(f"/pusher/{NS}/g", json={"secret": ""})).status_code == 200
    assert (await admin.get(f"/pusher/{NS}/g")).json()["pusher"]["signed"] is False
    await publish(runtime)
    await eventually(lambda: endpoints.received)
    assert "X-Lmstfy-Signature" not in endpoints.received[0].headers


async def test_an_idle_group_given_another_queue_pushes_it_at_once(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    """Its long-poll on the old queue (5 s) ends with the change."""
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/ok"), "old"))).status_code == 201
    await asyncio.sleep(0.3)  # the group now waits on "old"
    assert (await admin.put(f"/pusher/{NS}/g", json={"queues": ["new"]})).status_code == 200
    await publish(runtime, "new")
    await eventually(lambda: endpoints.received, timeout=1.0)


async def test_a_paused_queue_is_not_pushed(runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints) -> None:
    store = runtime.pools.get("default")
    await store.pause(NS, "q", True)
    await publish(runtime)
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/ok")))).status_code == 201
    await asyncio.sleep(1.0)
    assert endpoints.received == []
    await store.pause(NS, "q", False)
    await eventually(lambda: endpoints.received)


async def test_deliveries_are_counted_under_lmstfys_names_and_by_outcome(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/fail/1")))).status_code == 201
    await publish(runtime)
    await eventually(lambda: len(endpoints.received) == 2, timeout=5)
    await asyncio.sleep(0.2)
    scrape = Scrape(metrics.exposition().decode())
    labels = {"pool": "default", "namespace": NS, "queue": "q"}
    assert scrape.value("infra_lmstfy_pusher_push_http_codes", **labels, code="500") >= 1
    assert scrape.value("infra_lmstfy_pusher_push_http_codes", **labels, code="200") >= 1
    assert scrape.value("infra_lmstfy_pusher_push_latency_milliseconds_count", **labels) >= 2
    assert scrape.value("infra_lmstfy_pusher_consume_latency_milliseconds_count", **labels) >= 2
    by_group = {"pool": "default", "namespace": NS, "group": "g"}
    assert scrape.value("lmstfy_push_deliveries_total", **by_group, outcome="500") >= 1
    assert scrape.value("lmstfy_push_deliveries_total", **by_group, outcome="200") >= 1


async def test_a_jobs_trace_context_is_sent_as_headers_and_the_signature_stays_valid(
    runtime: Runtime, admin: httpx.AsyncClient, endpoints: Endpoints
) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert (await admin.post(f"/pusher/{NS}/g", json=pusher(endpoints.url("/ok"), secret=SECRET))).status_code == 201
    await publish(runtime, body=b"traced", trace=TraceContext(traceparent, "rojo=1"))
    await publish(runtime, body=b"plain")
    await eventually(lambda: len(endpoints.received) == 2)
    by_body = {base64.b64decode(got.job["body"]): got for got in endpoints.received}
    traced, plain = by_body[b"traced"], by_body[b"plain"]
    assert (traced.headers["traceparent"], traced.headers["tracestate"]) == (traceparent, "rojo=1")
    assert "traceparent" not in plain.headers and "tracestate" not in plain.headers
    stamp, _, digest = traced.headers["X-Lmstfy-Signature"].partition(",v1=")
    signed = f"{stamp.removeprefix('t=')}.".encode() + traced.raw
    assert hmac.compare_digest(digest, hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest())
