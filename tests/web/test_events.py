"""SPEC 13 Stream's refusals over HTTP, on every backend of the `runtime` fixture: each is a JSON answer
before any byte of a stream (streams themselves: tests/e2e/test_events_e2e.py, on real servers)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.web.conftest import Api, MakeToken, auth


def refusal(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


async def test_events_off_is_409_on_the_data_and_admin_routes(api: Api, admin: httpx.AsyncClient) -> None:
    off = {"error": "events are off for this queue"}
    assert refusal(await api.get("/events")) == (409, off)
    assert refusal(await api.client.get("/api/ns/events", params={"queues": "q"}, headers=api.headers)) == (409, off)
    assert refusal(await admin.get("/queues/ns/q/events")) == (409, off)


async def test_a_cursor_of_nothing_is_400_invalid_after(api: Api) -> None:
    assert (await api.client.put("/api/ns/q/settings", params={"events": 10}, headers=api.headers)).status_code == 200
    bad = {"error": "invalid after"}
    assert refusal(await api.client.get("/api/ns/q/events", params={"after": "nonsense"}, headers=api.headers)) == (
        400,
        bad,
    )
    headers = {**api.headers, "Last-Event-ID": "nonsense"}
    assert refusal(await api.client.get("/api/ns/q/events", params={"after": "0"}, headers=headers)) == (400, bad)
    # Digits of other scripts (str.isdigit's) are not a cursor's: int() refused them, a 500.
    for digits in ("\u00b2", "\u0661", "1\u2460"):
        answer = await api.client.get("/api/ns/q/events", params={"after": digits}, headers=api.headers)
        assert refusal(answer) == (400, bad), digits
    latin = {**api.headers, "Last-Event-ID": b"\xb2"}  # a header's bytes are read as latin-1: "\u00b2"
    assert refusal(await api.client.get("/api/ns/q/events", headers=latin)) == (400, bad)


@pytest.mark.parametrize("queues", ["", "a,,b", "a,a", ",".join(f"q{n}" for n in range(17)), "_hidden", "a b"])
async def test_a_bad_list_is_400_invalid_queues(api: Api, queues: str) -> None:
    response = await api.client.get("/api/ns/events", params={"queues": queues}, headers=api.headers)
    assert refusal(response) == (400, {"error": "invalid queues"})


async def test_streams_take_the_namespaces_token(api: Api, make_token: MakeToken, admin: httpx.AsyncClient) -> None:
    other = auth(await make_token("other"))
    assert refusal(await api.client.get("/api/ns/q/events")) == (401, {"error": "token not found"})
    assert refusal(await api.client.get("/api/ns/q/events", headers=other)) == (401, {"error": "invalid token"})
    merged = await api.client.get("/api/ns/events", params={"queues": "q,r"}, headers=other)
    assert refusal(merged) == (401, {"error": "invalid token"})
    assert refusal(await admin.get("/queues/ns/q/events", params={"pool": "nope"})) == (
        400,
        {"error": "pool not found"},
    )


async def test_without_queues_the_url_stays_the_consume_of_a_queue_named_events(api: Api) -> None:
    job_id = await api.publish("events")
    assert (await api.consume_job("events"))["job_id"] == job_id
    assert refusal(await api.consume("events")) == (404, {"msg": "no job available"})
