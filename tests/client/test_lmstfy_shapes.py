"""Go lmstfy's answers, byte for byte as its handlers write them (server/handlers/queue.go,
throttler.go of bitleak/lmstfy), read by the same readers the clients use: no Go server runs
here, and these are the places where its answers differ from lmstfy-py's (test_routes.py reads
lmstfy-py's own answers from a real server)."""

from __future__ import annotations

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


def test_an_unreadable_success_is_a_server_error() -> None:
    with pytest.raises(ServerError, match="unexpected answer"):
        read(ROUTES.stats("q"), 200, b'{"ready":1}')


def _no_options() -> PublishOptions:
    return PublishOptions()
