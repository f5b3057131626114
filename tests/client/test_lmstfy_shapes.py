"""Go lmstfy's answers, byte for byte as its handlers write them (server/handlers/queue.go,
throttler.go of bitleak/lmstfy), read by the same readers the clients use: no Go server runs
here, and these are the places where its answers differ from lmstfy-py's (test_routes.py reads
lmstfy-py's own answers from a real server)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest

from lmstfy_py.client import Answer, DeadLetter, Job, NotFound, ServerError, Throttled
from lmstfy_py.client.routes import PublishOptions, Routes

ROUTES = Routes("ns")
# A consume answer of lmstfy 1.0.x: no "attributes" key, a job without ttl as uint32(-1).
GO_JOB = (
    b'{"msg":"new job","namespace":"ns","queue":"q","job_id":"01M80JAJJVYF6PEPP4G0F00000",'
    b'"data":"aGVsbG8=","ttl":4294967295,"elapsed_ms":5,"remain_tries":2}'
)


def read(call: Any, status: int, body: bytes) -> Any:
    return call.read(Answer(status, body, "req-1"))


def test_a_go_job_reads_as_a_job_that_never_expires_without_attributes() -> None:
    [job] = read(ROUTES.consume("q", 30, 0, 1), 200, GO_JOB)
    assert job == Job("01M80JAJJVYF6PEPP4G0F00000", "ns", "q", b"hello", ttl=0, elapsed_ms=5, remain_tries=2)


def test_a_job_read_is_the_job_its_constructor_makes_and_as_frozen() -> None:
    # job_of sets the slots of a frozen Job directly (calls.py, job.py's job_from): the same object.
    body = GO_JOB[:-1] + b',"attributes":{"k":"v"},"state":"reserved","attempts":2,"traceparent":"00-x"}'
    job = read(ROUTES.peek_job("q", "01M80JAJJVYF6PEPP4G0F00000"), 200, body)
    made = Job("01M80JAJJVYF6PEPP4G0F00000", "ns", "q", b"hello", 0, 5, 2, {"k": "v"}, state="reserved")
    assert job == replace(made, attempts=2, traceparent="00-x")
    assert repr(job) == repr(replace(made, attempts=2, traceparent="00-x"))
    with pytest.raises(FrozenInstanceError):
        job.queue = "other"  # type: ignore[misc]


def test_go_answers_null_data_for_an_empty_body() -> None:
    body = GO_JOB.replace(b'"aGVsbG8="', b"null")
    assert read(ROUTES.peek_job("q", "01M80JAJJVYF6PEPP4G0F00000"), 200, body).data == b""


def test_a_multi_queue_consume_with_count_answers_one_object_in_go() -> None:
    # lmstfy batch-consumes one queue only; several queues answer one job whatever the count.
    jobs = read(ROUTES.consume(["q", "r"], 30, 5, 10), 200, GO_JOB)
    assert [job.id for job in jobs] == ["01M80JAJJVYF6PEPP4G0F00000"]
    assert len(read(ROUTES.consume("q", 30, 0, 10), 200, b"[" + GO_JOB + b"," + GO_JOB + b"]")) == 2


def test_go_404_bodies() -> None:
    assert read(ROUTES.consume("q", 30, 0, 1), 404, b'{"msg":"no job available"}') == []
    assert read(ROUTES.peek("q"), 404, b'{"error":"the queue is empty"}') is None
    assert read(ROUTES.peek("q"), 404, b'{"error":"job not found"}') is None  # the head's data expired
    assert read(ROUTES.peek_job("q", "x"), 404, b'{"error":"job not found"}') is None
    with pytest.raises(NotFound, match="pool not found"):
        read(ROUTES.consume("q", 30, 0, 1), 404, b'{"error":"pool not found"}')
    with pytest.raises(NotFound, match="api not found"):
        read(ROUTES.stats("q"), 404, b'{"error":"api not found"}')  # a route lmstfy lacks


def test_go_error_bodies_keep_their_message() -> None:
    with pytest.raises(ServerError) as internal:
        read(ROUTES.ack("q", "x"), 500, b'{"error":"internal error"}')
    assert (internal.value.status, internal.value.message, internal.value.request_id) == (
        500,
        "internal error",
        "req-1",
    )
    with pytest.raises(ServerError, match="the throttler was broken"):
        read(ROUTES.publish("q", b"x", _no_options(), None), 500, b'{"err":"the throttler was broken"}')
    throttled = b'{"msg":"token(t) produce reach the limit rate, please retry later"}'
    with pytest.raises(Throttled, match="produce reach the limit rate"):
        read(ROUTES.publish("q", b"x", _no_options(), None), 429, throttled)
    with pytest.raises(ServerError, match="Bad Gateway"):
        read(ROUTES.size("q"), 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>")


def test_go_answers_of_the_other_routes() -> None:
    published = b'{"msg":"published","job_id":"01M80JAJJVYF6PEPP4G0F00000"}'
    assert read(ROUTES.publish("q", b"x", _no_options(), None), 201, published) == "01M80JAJJVYF6PEPP4G0F00000"
    bulk = b'{"msg":"published","job_ids":["a","b"]}'
    assert read(ROUTES.publish_many("q", [1, 2], _no_options(), None), 201, bulk) == ["a", "b"]
    dead = b'{"namespace":"ns","queue":"q","deadletter_size":0,"deadletter_head":""}'
    assert read(ROUTES.dead_letter("q"), 200, dead) == DeadLetter(0, "")
    assert read(ROUTES.respawn("q", 5, None), 200, b'{"msg":"respawned","count":2}') == 2
    assert read(ROUTES.size("q"), 200, b'{"namespace":"ns","queue":"q","size":7}') == 7
    assert read(ROUTES.ack("q", "x"), 204, b"") is None


# The query parameters Go lmstfy's handlers read, route by route (server/handlers/queue.go; its
# later versions added priority): a call of an lmstfy route made with lmstfy's own options sends
# nothing else, so Go lmstfy reads every parameter the caller gave.
GO_PARAMS = {
    "publish": {"delay", "ttl", "tries", "priority"},
    "bulk": {"delay", "ttl", "tries"},
    "consume": {"ttr", "timeout", "count"},
    "respawn": {"limit", "ttl"},
    "delete_dead": {"limit"},
}
LMSTFY_OPTIONS = PublishOptions(delay=30, ttl=600, tries=3)
GO_CALLS: list[tuple[str, Any, str, str]] = [
    ("publish", ROUTES.publish("q", b"x", PublishOptions(), None), "PUT", "/api/ns/q"),
    ("publish", ROUTES.publish("q", b"x", LMSTFY_OPTIONS, None), "PUT", "/api/ns/q"),
    ("publish", ROUTES.publish("q", b"x", PublishOptions(priority=5), None), "PUT", "/api/ns/q"),
    ("bulk", ROUTES.publish_many("q", [1, 2], LMSTFY_OPTIONS, None), "PUT", "/api/ns/q/bulk"),
    ("publish", ROUTES.republish("q", "old", b"x", LMSTFY_OPTIONS, None), "PUT", "/api/ns/q/job/old"),
    ("consume", ROUTES.consume("q", None, 0, 1), "GET", "/api/ns/q"),
    ("consume", ROUTES.consume(["q", "r"], 30, 5, 1), "GET", "/api/ns/q,r"),
    ("consume", ROUTES.consume("q", 30, 5, 100), "GET", "/api/ns/q"),
    ("none", ROUTES.ack("q", "id1"), "DELETE", "/api/ns/q/job/id1"),
    ("none", ROUTES.peek("q"), "GET", "/api/ns/q/peek"),
    ("none", ROUTES.peek_job("q", "id1"), "GET", "/api/ns/q/job/id1"),
    ("none", ROUTES.size("q"), "GET", "/api/ns/q/size"),
    ("none", ROUTES.destroy("q"), "DELETE", "/api/ns/q"),
    ("none", ROUTES.dead_letter("q"), "GET", "/api/ns/q/deadletter"),
    ("none", ROUTES.dead_letter_size("q"), "GET", "/api/ns/q/deadletter/size"),
    ("respawn", ROUTES.respawn("q", 5, None), "PUT", "/api/ns/q/deadletter"),
    ("respawn", ROUTES.respawn("q", 5, 600), "PUT", "/api/ns/q/deadletter"),
    ("delete_dead", ROUTES.delete_dead("q", 5), "DELETE", "/api/ns/q/deadletter"),
]


@pytest.mark.parametrize(("route", "call", "method", "path"), GO_CALLS, ids=[f"{c[2]} {c[3]}" for c in GO_CALLS])
def test_lmstfy_routes_send_only_what_go_lmstfy_reads(route: str, call: Any, method: str, path: str) -> None:
    assert (call.method, call.path) == (method, path)
    assert set(call.params) <= GO_PARAMS.get(route, set()), call.params
    assert all(value.isdigit() for value in call.params.values())  # Go parses each with ParseUint
    assert call.headers == {}  # only the client's X-Token and User-Agent


def test_whole_seconds_go_as_lmstfy_seconds_fractions_as_milliseconds() -> None:
    assert ROUTES.publish("q", b"x", PublishOptions(delay=2.0), None).params == {"delay": "2"}
    assert ROUTES.consume("q", 30.0, 0, 1).params == {"ttr": "30", "timeout": "0"}
    assert ROUTES.publish("q", b"x", PublishOptions(delay=1.5), None).params == {"delay_ms": "1500"}
    assert ROUTES.consume("q", 0.25, 0, 1).params == {"ttr_ms": "250", "timeout": "0"}


def test_an_unreadable_success_is_a_server_error() -> None:
    with pytest.raises(ServerError, match="unexpected answer"):
        read(ROUTES.stats("q"), 200, b'{"ready":1}')


def _no_options() -> PublishOptions:
    return PublishOptions()
