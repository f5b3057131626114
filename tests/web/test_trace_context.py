"""W3C trace context kept with each job (SPEC 15): the headers a publish, a bulk and a republish
keep, and every answer that shows the job (consume, peek, job state, dead letter) gives back,
across re-deliveries and respawns. The store keeps it in the job's data (store/jobdata.py), the
same on every pool kind: one standalone Redis here; the pushers' headers are tests/push's.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lmstfy_py.runtime import Runtime
from lmstfy_py.types import TraceContext
from lmstfy_py.web import create_data_app
from lmstfy_py.web.hot import HotRoutes
from lmstfy_py.web.params import trace_context
from tests.conftest import client_for
from tests.web.conftest import Api, wait_for

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
SAMPLED = f"00-{TRACE}-{PARENT}-01"
OTHER = f"00-{'1' * 32}-{'2' * 16}-00"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@pytest.fixture
def runtime(standalone_runtime: Runtime) -> Runtime:
    # The context rides in the job's data, which no script reads: the backend changes nothing here.
    return standalone_runtime


def traced(traceparent: str = SAMPLED, tracestate: str | None = STATE) -> dict[str, str]:
    return {"traceparent": traceparent} | ({"tracestate": tracestate} if tracestate is not None else {})


def trace_of(job: dict[str, Any]) -> tuple[Any, Any]:
    return job["traceparent"], job["tracestate"]


async def publish(api: Api, headers: dict[str, str], path: str = "", body: bytes = b"x", **query: Any) -> str:
    answer = await api.client.put(f"/api/ns/q{path}", content=body, params=query, headers=api.headers | headers)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["job_id"]
    return job_id


async def bulk(api: Api, body: str, headers: dict[str, str] | None = None, **query: Any) -> httpx.Response:
    return await api.client.put("/api/ns/q/bulk", content=body, params=query, headers=api.headers | (headers or {}))


async def consume_all(api: Api, count: int) -> list[dict[str, Any]]:
    answer = await api.consume(count=count, timeout=1)
    assert answer.status_code == 200, answer.text
    jobs: list[dict[str, Any]] = answer.json()
    return sorted(jobs, key=lambda job: job["data"])


# -- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("traceparent", "kept"),
    [
        (SAMPLED, SAMPLED),
        (f" {SAMPLED}\t", SAMPLED),  # optional whitespace around a header's value
        (f"00-{TRACE}-{PARENT}-00", f"00-{TRACE}-{PARENT}-00"),
        # A higher version is read by its first four fields, and kept as version 00.
        (f"01-{TRACE}-{PARENT}-01", SAMPLED),
        (f"cc-{TRACE}-{PARENT}-01-what-comes-later", SAMPLED),
    ],
)
def test_a_valid_traceparent_is_kept_with_its_tracestate(traceparent: str, kept: str) -> None:
    assert trace_context(traceparent, STATE) == TraceContext(kept, STATE)


@pytest.mark.parametrize(
    "traceparent",
    [
        "",
        f"ff-{TRACE}-{PARENT}-01",  # version ff is invalid
        f"00-{TRACE}-{PARENT}-01-",  # version 00 has exactly four fields
        f"00-{TRACE.upper()}-{PARENT}-01",  # lowercase hex only
        f"00-{'0' * 32}-{PARENT}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE[:-1]}-{PARENT}-01",
        f"01-{TRACE}-{PARENT}-01x",  # a higher version goes on with "-" after its four fields
        f"00_{TRACE}_{PARENT}_01",
    ],
)
def test_an_invalid_traceparent_is_ignored_and_drops_the_tracestate(traceparent: str) -> None:
    assert trace_context(traceparent, STATE) is None


@pytest.mark.parametrize("tracestate", ["a" * 513, "", "  ", "caf\xe9=1", "a=1\x01"])
def test_a_tracestate_too_long_or_malformed_is_dropped_and_the_traceparent_kept(tracestate: str) -> None:
    assert trace_context(SAMPLED, tracestate) == TraceContext(SAMPLED, None)
    assert trace_context(SAMPLED, "a" * 512) == TraceContext(SAMPLED, "a" * 512)


# -- one job ---------------------------------------------------------------------------------------


async def test_a_published_context_comes_back_with_consume_peek_and_job_state(api: Api) -> None:
    job_id = await publish(api, traced())
    peeked = (await api.get("/peek")).json()
    state = (await api.get(f"/job/{job_id}")).json()
    consumed = await api.consume_job()
    for shown in (peeked, state, consumed):
        assert (shown["job_id"], trace_of(shown)) == (job_id, (SAMPLED, STATE))


async def test_a_job_without_a_valid_context_shows_nulls_and_is_published_all_the_same(api: Api) -> None:
    plain = await publish(api, {})
    invalid = await publish(api, traced(f"00-{'0' * 32}-{PARENT}-01"), body=b"y")
    without_state = await publish(api, traced(tracestate=None), body=b"z")
    jobs = await consume_all(api, 3)
    assert [job["job_id"] for job in jobs] == [plain, invalid, without_state]
    assert [trace_of(job) for job in jobs] == [(None, None), (None, None), (SAMPLED, None)]


async def test_the_context_survives_a_redelivery_the_dead_letter_and_a_respawn(api: Api) -> None:
    job_id = await publish(api, traced(), tries=2)
    first = await api.consume_job(ttr=1)
    second = await api.consume_job(ttr=0, timeout=3)  # delivered again once the first ttr passed
    assert first["job_id"] == second["job_id"] == job_id and trace_of(second) == (SAMPLED, STATE)
    await wait_for(lambda: api.dead_size_above(0))
    [dead] = (await api.get("/deadletter/jobs")).json()["jobs"]
    assert (dead["job_id"], trace_of(dead)) == (job_id, (SAMPLED, STATE))
    assert (await api.client.put("/api/ns/q/deadletter", headers=api.headers)).status_code == 200
    respawned = await api.consume_job()
    assert (respawned["job_id"], trace_of(respawned)) == (job_id, (SAMPLED, STATE))


async def test_a_republish_keeps_its_own_context(api: Api) -> None:
    old = await publish(api, traced(OTHER, "old=1"))
    assert (await api.consume_job())["job_id"] == old
    new = await publish(api, traced(), path=f"/job/{old}")
    assert (new != old) and trace_of(await api.consume_job()) == (SAMPLED, STATE)


async def test_the_served_dispatcher_keeps_it_and_joins_repeated_tracestates(runtime: Runtime, api: Api) -> None:
    headers = [*api.headers.items(), ("traceparent", SAMPLED), ("tracestate", "a=1"), ("tracestate", "b=2")]
    async with client_for(HotRoutes(create_data_app(runtime))) as lean:
        assert (await lean.put("/api/ns/q", content=b"x", headers=headers)).status_code == 201
        consumed = (await lean.get("/api/ns/q", headers=api.headers)).json()
    assert trace_of(consumed) == (SAMPLED, "a=1,b=2")


# -- bulk ------------------------------------------------------------------------------------------


async def test_a_bulk_array_gives_the_requests_context_to_every_job(api: Api) -> None:
    assert (await bulk(api, '["a","b"]', traced())).status_code == 201
    assert [trace_of(job) for job in await consume_all(api, 2)] == [(SAMPLED, STATE)] * 2


async def test_the_object_form_s_own_fields_win_over_the_headers_and_query(api: Api) -> None:
    jobs = [
        {"data": "a"},  # the request's
        {"data": {"n": 2}, "traceparent": OTHER},  # its own traceparent: never the request's tracestate (a pair)
        {"data": "c", "traceparent": OTHER, "tracestate": "mine=1", "group": "g2"},
        {"data": "d", "traceparent": "nonsense"},  # its own, invalid: none
        {"data": "e", "traceparent": None, "tracestate": "mine=2", "group": None},  # null: the request's
    ]
    body = json.dumps({"jobs": jobs})
    answer = await bulk(api, body, traced(), group="g1", job_id="j1,j2,j3,j4,j5")
    assert answer.status_code == 201, answer.text
    assert answer.json()["job_ids"] == ["j1", "j2", "j3", "j4", "j5"]
    shown = {job_id: (await api.get(f"/job/{job_id}")).json() for job_id in ("j1", "j2", "j3", "j4", "j5")}
    assert [trace_of(job) for job in shown.values()] == [
        (SAMPLED, STATE),
        (OTHER, None),
        (OTHER, "mine=1"),
        (None, None),
        (SAMPLED, "mine=2"),
    ]
    assert [job["group"] for job in shown.values()] == ["g1", "g1", "g2", "g1", "g1"]
    # `data` is kept as the exact JSON text of its value, as an array's element
    assert shown["j2"]["data"] == "eyJuIjogMn0="  # {"n": 2}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"a": 1}', "request body should be an array of objects"),  # lmstfy's answer, as before
        ('{"jobs": 1}', "request body should be an array of objects"),
        ('{"jobs": [], "x": 1}', "request body should be an array of objects"),
        ('{"jobs": [{"data": 1},]}', "request body should be an array of objects"),
        ('{"jobs": []}', "no jobs"),
        ('{"jobs": [' + ",".join(['{"data":1}'] * 65) + "]}", "too many jobs"),
        ('{"jobs": [1]}', 'each of "jobs" should be an object with "data"'),
        ('{"jobs": [{"traceparent": "x"}]}', 'each of "jobs" should be an object with "data"'),
        ('{"jobs": [{"data": 1, "ttl": 5}]}', 'unknown field "ttl" in a job'),
        ('{"jobs": [{"data": 1, "traceparent": 5}]}', "traceparent should be a string"),
        ('{"jobs": [{"data": 1, "group": "a b"}]}', "invalid group"),
    ],
)
async def test_a_bad_object_body_is_refused_with_400_and_publishes_nothing(api: Api, body: str, error: str) -> None:
    answer = await bulk(api, body)
    assert (answer.status_code, answer.json()) == (400, {"error": error})
    assert await api.size() == 0


async def test_the_object_form_needs_one_job_id_per_job(api: Api) -> None:
    answer = await bulk(api, '{"jobs": [{"data": 1}, {"data": 2}]}', job_id="only-one")
    assert (answer.status_code, answer.json()) == (400, {"error": "job_id should name one id per job of the bulk"})
