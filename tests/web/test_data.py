"""Every data-plane route and error over HTTP, against standalone Redis and Redis Cluster."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from lmstfy_py import ids
from lmstfy_py.store import jobdata
from lmstfy_py.web.params import MAX_BODY
from tests.web.conftest import Api, MakeToken, auth

# -- publish and consume ---------------------------------------------------------------


async def test_publish_consume_round_trips_binary_data(api: Api) -> None:
    body = bytes(range(256)) * 3
    job_id = await api.publish(body=body)
    assert ids.is_valid(job_id) and len(job_id) == 26
    job = await api.consume_job()
    assert job.pop("elapsed_ms") >= 0  # type: ignore[operator]
    assert job == {
        "msg": "new job",
        "namespace": "ns",
        "queue": "q",
        "job_id": job_id,
        "data": base64.b64encode(body).decode(),
        "ttl": 86400,
        "remain_tries": 0,
        "attributes": None,
        # Beyond lmstfy, SPEC 15: the W3C trace context it was published with (tests/web/test_trace_context.py).
        "traceparent": None,
        "tracestate": None,
    }


async def test_publish_empty_body_and_query_token(data: httpx.AsyncClient, token: str) -> None:
    response = await data.put("/api/ns/q", params={"token": token})
    assert response.status_code == 201
    job = (await data.get("/api/ns/q", params={"token": token})).json()
    assert job["data"] == ""


async def test_publish_parameters_reach_the_job(api: Api) -> None:
    await api.publish(ttl=0, tries=3)
    job = await api.consume_job()
    assert (job["ttl"], job["remain_tries"]) == (0, 2)
    await api.publish(ttl=50)
    assert (await api.consume_job())["ttl"] in (49, 50)


async def test_body_of_exactly_one_mib_is_accepted(api: Api) -> None:
    await api.publish(body=b"x" * MAX_BODY)
    job = await api.consume_job()
    assert base64.b64decode(job["data"]) == b"x" * MAX_BODY  # type: ignore[arg-type]


async def test_body_too_large_by_content_length(data: httpx.AsyncClient, token: str) -> None:
    response = await data.put("/api/ns/q", content=b"x" * (MAX_BODY + 1), headers=auth(token))
    assert (response.status_code, response.json()) == (413, {"error": "body too large"})
    assert "x-request-id" in response.headers


async def test_body_too_large_while_streaming(data: httpx.AsyncClient, token: str) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for _ in range(5):
            yield b"x" * (MAX_BODY // 4)

    response = await data.put("/api/ns/q", content=chunks(), headers=auth(token))
    assert "content-length" not in response.request.headers
    assert (response.status_code, response.json()) == (413, {"error": "body too large"})
    response = await data.put("/api/ns/q/bulk", content=chunks(), headers=auth(token))
    assert (response.status_code, response.json()) == (413, {"error": "body too large"})


async def test_attributes(api: Api) -> None:
    headers = {
        **api.headers,
        "Enable-Job-Version": "yes",
        "Job-Attr-Color": "red",
        "job-attr-" + "K" * 40: "v" * 200,
    }
    response = await api.client.put("/api/ns/q", content=b"a", headers=headers)
    job_id = response.json()["job_id"]
    assert len(job_id) == 27 and job_id.startswith("1") and ids.is_valid(job_id)
    assert (await api.consume_job())["attributes"] == {"color": "red", "k" * 32: "v" * 128}


async def test_attributes_need_enable_job_version(api: Api) -> None:
    response = await api.client.put("/api/ns/q", headers={**api.headers, "Job-Attr-Color": "red"})
    assert len(response.json()["job_id"]) == 26
    assert (await api.consume_job())["attributes"] is None
    # Versioned but without attributes: a versioned id, and null like lmstfy.
    response = await api.client.put("/api/ns/q", headers={**api.headers, "Enable-Job-Version": "YES"})
    assert response.json()["job_id"].startswith("1")
    assert (await api.consume_job())["attributes"] is None


async def test_too_many_attributes(api: Api) -> None:
    headers = {**api.headers, "Enable-Job-Version": "YES", **{f"Job-Attr-K{i}": "v" for i in range(17)}}
    response = await api.client.put("/api/ns/q", headers=headers)
    assert (response.status_code, response.json()) == (400, {"error": "too many attributes"})
    response = await api.client.put("/api/ns/q/bulk", content=b"[1]", headers=headers)
    assert (response.status_code, response.json()) == (400, {"error": "too many attributes"})


async def test_bulk_publish_keeps_each_element_text(api: Api) -> None:
    response = await api.client.put(
        "/api/ns/q/bulk", content=b'[ {"a": 1}, "x", 1.0e2 ]', params={"tries": 2}, headers=api.headers
    )
    assert response.status_code == 201
    body = response.json()
    assert body["msg"] == "published" and len(body["job_ids"]) == 3
    jobs = (await api.consume(count=3)).json()
    assert [job["job_id"] for job in jobs] == body["job_ids"]
    assert [base64.b64decode(job["data"]) for job in jobs] == [b'{"a": 1}', b'"x"', b"1.0e2"]
    assert {job["remain_tries"] for job in jobs} == {1}


async def test_bulk_publish_with_attributes(api: Api) -> None:
    headers = {**api.headers, "Enable-Job-Version": "YES", "Job-Attr-X": "1"}
    response = await api.client.put("/api/ns/q/bulk", content=b"[1,2]", headers=headers)
    assert all(job_id.startswith("1") for job_id in response.json()["job_ids"])
    assert [job["attributes"] for job in (await api.consume(count=2)).json()] == [{"x": "1"}] * 2


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "request body should be an array of objects"),
        (b'{"a": 1}', "request body should be an array of objects"),
        (b"[1,]", "request body should be an array of objects"),
        (b"[]", "no jobs"),
        (b"[" + b",".join([b"1"] * 65) + b"]", "too many jobs"),
    ],
)
async def test_bulk_publish_errors(api: Api, body: bytes, error: str) -> None:
    response = await api.client.put("/api/ns/q/bulk", content=body, headers=api.headers)
    assert (response.status_code, response.json()) == (400, {"error": error})


async def test_bulk_publish_64_jobs(api: Api) -> None:
    response = await api.client.put("/api/ns/q/bulk", content=b"[" + b",".join([b"1"] * 64) + b"]", headers=api.headers)
    assert response.status_code == 201 and len(response.json()["job_ids"]) == 64
    assert await api.size() == 64


async def test_consume_nothing(api: Api) -> None:
    response = await api.consume()
    assert (response.status_code, response.json()) == (404, {"msg": "no job available"})
    response = await api.consume(count=5)
    assert (response.status_code, response.json()) == (404, {"msg": "no job available"})


async def test_multi_queue_consume_listed_first_wins(api: Api) -> None:
    in_b = await api.publish("b")
    in_a = await api.publish("a")
    # No timeout: lmstfy refuses this, we allow it.
    assert (await api.consume_job("a,b"))["job_id"] == in_a
    assert (await api.consume_job(",a,,b,"))["job_id"] == in_b
    assert (await api.consume("a,b")).status_code == 404


async def test_count_above_one_answers_an_array(api: Api) -> None:
    first, second = await api.publish(), await api.publish()
    in_other = await api.publish("other")
    response = await api.consume(count=2)
    assert [job["job_id"] for job in response.json()] == [first, second]
    assert all(job["msg"] == "new job" for job in response.json())
    # Even one job comes as an array, and several queues work with count > 1.
    jobs = (await api.consume("q,other", count=5)).json()
    assert [job["job_id"] for job in jobs] == [in_other]
    assert jobs[0]["queue"] == "other"


async def test_long_poll_returns_a_job_published_meanwhile(api: Api) -> None:
    async def publish_later() -> str:
        await asyncio.sleep(0.3)
        return await api.publish()

    started = time.monotonic()
    response, job_id = await asyncio.gather(api.consume(timeout=2), publish_later())
    elapsed = time.monotonic() - started
    assert response.status_code == 200 and response.json()["job_id"] == job_id
    assert 0.25 < elapsed < 1.5


async def test_long_poll_on_an_empty_queue_times_out(api: Api) -> None:
    started = time.monotonic()
    response = await api.consume("q,r", timeout=1)
    assert (response.status_code, response.json()) == (404, {"msg": "no job available"})
    assert 0.9 < time.monotonic() - started < 2.5


async def test_queue_named_like_a_sub_route(api: Api) -> None:
    for queue in ("peek", "size", "bulk", "deadletter", "job"):
        job_id = await api.publish(queue)
        assert (await api.consume_job(queue))["job_id"] == job_id


# -- ack, peek, size, destroy --------------------------------------------------------------


async def test_ack(api: Api) -> None:
    job_id = await api.publish()
    await api.consume_job()
    response = await api.client.delete(f"/api/ns/q/job/{job_id}", headers=api.headers)
    assert response.status_code == 204 and response.content == b""
    response = await api.get(f"/job/{job_id}")
    assert (response.status_code, response.json()) == (404, {"error": "job not found"})
    # ACKing what does not exist is no error either.
    response = await api.client.delete(f"/api/ns/q/job/{jobdata.new_job_id(0)}", headers=api.headers)
    assert response.status_code == 204


async def test_peek_queue_does_not_consume(api: Api) -> None:
    response = await api.get("/peek")
    assert (response.status_code, response.json()) == (404, {"error": "the queue is empty"})
    job_id = await api.publish(body=b"p", tries=2)
    await api.publish()
    peeked = (await api.get("/peek")).json()
    assert "msg" not in peeked
    assert (peeked["job_id"], peeked["data"], peeked["remain_tries"], peeked["ttl"]) == (job_id, "cA==", 2, 86400)
    assert peeked["attributes"] is None and peeked["elapsed_ms"] >= 0
    assert await api.size() == 2
    assert (await api.consume_job())["job_id"] == job_id


async def test_peek_job(api: Api) -> None:
    job_id = await api.publish(body=b"j")
    job = (await api.get(f"/job/{job_id}")).json()
    assert job.pop("elapsed_ms") >= 0
    assert job == {
        "namespace": "ns",
        "queue": "q",
        "job_id": job_id,
        "data": "ag==",
        "ttl": 86400,
        "remain_tries": 1,
        "attributes": None,
        "traceparent": None,  # Beyond lmstfy, SPEC 15 (tests/web/test_trace_context.py)
        "tracestate": None,
        # Beyond lmstfy: where the job is in its life (tests/web/test_worker_verbs.py covers every state).
        "state": "ready",
        "due_ms": None,
        "attempts": 0,
        "priority": 0,
        "last_error": None,
        # Beyond lmstfy, SPEC 13: set once it ended (tests/web/test_outcomes.py).
        "result": None,
        "finished_ms": None,
        "group": None,  # SPEC 14 (tests/web/test_flow.py)
    }
    response = await api.get(f"/job/{jobdata.new_job_id(0)}")
    assert (response.status_code, response.json()) == (404, {"error": "job not found"})


async def test_republish_replaces_the_job(api: Api) -> None:
    old_id = await api.publish(body=b"old")
    await api.consume_job(ttr=100)
    response = await api.client.put(f"/api/ns/q/job/{old_id}", content=b"new", headers=api.headers)
    assert response.status_code == 201 and response.json()["msg"] == "published"
    new_id = response.json()["job_id"]
    assert new_id != old_id
    assert (await api.get(f"/job/{old_id}")).status_code == 404
    job = await api.consume_job()
    assert (job["job_id"], job["data"]) == (new_id, "bmV3")


async def test_size_and_destroy(api: Api) -> None:
    for _ in range(3):
        await api.publish()
    response = await api.client.get("/api/ns/q/size")  # no token needed
    assert response.json() == {"namespace": "ns", "queue": "q", "size": 3}
    response = await api.client.delete("/api/ns/q", headers=api.headers)
    assert response.status_code == 204
    assert await api.size() == 0
    assert (await api.consume()).status_code == 404


# -- dead letter ---------------------------------------------------------------------------


async def test_dead_letter_peek_respawn_delete(api: Api) -> None:
    response = await api.get("/deadletter")
    assert response.json() == {"namespace": "ns", "queue": "q", "deadletter_size": 0, "deadletter_head": ""}
    first = await api.kill_one()
    second = await api.kill_one()
    response = await api.get("/deadletter")
    assert response.json() == {"namespace": "ns", "queue": "q", "deadletter_size": 2, "deadletter_head": first}
    response = await api.client.get("/api/ns/q/deadletter/size")  # no token needed
    assert response.json() == {"namespace": "ns", "queue": "q", "size": 2}

    response = await api.client.put("/api/ns/q/deadletter", headers=api.headers)  # limit=1 by default
    assert response.json() == {"msg": "respawned", "count": 1}
    job = await api.consume_job()
    assert (job["job_id"], job["ttl"]) == (first, 86400)

    response = await api.client.delete("/api/ns/q/deadletter", params={"limit": 5}, headers=api.headers)
    assert response.status_code == 204
    assert await api.dead_size() == 0
    assert (await api.get(f"/job/{second}")).status_code == 404


async def test_respawn_with_ttl_and_limit(api: Api) -> None:
    for _ in range(3):
        await api.kill_one()
    response = await api.client.put("/api/ns/q/deadletter", params={"limit": 2, "ttl": 0}, headers=api.headers)
    assert response.json() == {"msg": "respawned", "count": 2}
    jobs = (await api.consume(count=5)).json()
    assert [(job["ttl"], job["remain_tries"]) for job in jobs] == [(0, 0), (0, 0)]
    response = await api.client.put("/api/ns/q/deadletter", params={"limit": 9}, headers=api.headers)
    assert response.json() == {"msg": "respawned", "count": 1}


# -- auth, names and parameters --------------------------------------------------------------

TOKEN_ROUTES = [
    ("PUT", "/api/{ns}/q"),
    ("PUT", "/api/{ns}/q/bulk"),
    ("PUT", "/api/{ns}/q/job/{id}"),
    ("GET", "/api/{ns}/q"),
    ("GET", "/api/{ns}/q,r"),
    ("DELETE", "/api/{ns}/q/job/{id}"),
    ("DELETE", "/api/{ns}/q/jobs?job_id={id}"),
    ("GET", "/api/{ns}/q/peek"),
    ("GET", "/api/{ns}/q/job/{id}"),
    ("DELETE", "/api/{ns}/q"),
    ("GET", "/api/{ns}/q/deadletter"),
    ("PUT", "/api/{ns}/q/deadletter"),
    ("DELETE", "/api/{ns}/q/deadletter"),
]


def _url(path: str, ns: str) -> str:
    return path.format(ns=ns, id=jobdata.new_job_id(0))


@pytest.mark.parametrize(("method", "path"), TOKEN_ROUTES)
async def test_token_checks(data: httpx.AsyncClient, make_token: MakeToken, method: str, path: str) -> None:
    token_a = await make_token("a")
    await make_token("b")
    cases = [
        ({}, 401, "token not found"),
        ({"X-Token": "default:"}, 401, "token not found"),
        ({"X-Token": "wrong"}, 401, "invalid token"),
        ({"X-Token": token_a}, 401, "invalid token"),  # namespace a's token on namespace b
        ({"X-Token": f"nope:{token_a}"}, 404, "pool not found"),
    ]
    for headers, status, error in cases:
        response = await data.request(method, _url(path, "b"), content=b"[1]", headers=headers)
        assert (response.status_code, response.json()) == (status, {"error": error}), headers
    # Bad names are refused before the pool and the token are looked at.
    response = await data.request(method, _url(path, "b.c"), headers={"X-Token": "nope:x"})
    assert (response.status_code, response.json()) == (400, {"error": "namespace name contains forbidden characters"})


async def test_isolation_leaves_the_other_namespace_untouched(data: httpx.AsyncClient, make_token: MakeToken) -> None:
    token_a, token_b = await make_token("a"), await make_token("b")
    response = await data.put("/api/b/q", content=b"secret", headers=auth(token_b))
    job_id = response.json()["job_id"]
    for method, path in TOKEN_ROUTES:
        url = path.format(ns="b", id=job_id)
        response = await data.request(method, url, content=b"[1]", headers=auth(token_a))
        assert response.status_code == 401
    response = await data.get(f"/api/b/q/job/{job_id}", headers=auth(token_b))
    assert response.status_code == 200 and response.json()["data"] == "c2VjcmV0"


async def test_public_size_routes_still_pick_the_pool(data: httpx.AsyncClient) -> None:
    for path in ("/api/ns/q/size", "/api/ns/q/deadletter/size"):
        assert (await data.get(path, params={"token": "whatever"})).status_code == 200
        response = await data.get(path, headers={"X-Token": "nope:x"})
        assert (response.status_code, response.json()) == (404, {"error": "pool not found"})
        response = await data.get(path.replace("ns", "n.s"))
        assert response.status_code == 400


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/api/" + "n" * 256 + "/q", "namespace or queue name too long"),
        ("/api/ns/" + "q" * 256, "namespace or queue name too long"),
        ("/api/n%20s/q", "namespace name contains forbidden characters"),
        ("/api/ns/_q", "queue name contains forbidden characters"),
        ("/api/ns/q.x", "queue name contains forbidden characters"),
        ("/api/ns/q,r", "queue name contains forbidden characters"),
    ],
)
async def test_bad_names_on_publish(api: Api, path: str, error: str) -> None:
    response = await api.client.put(path, headers=api.headers)
    assert (response.status_code, response.json()) == (400, {"error": error})


@pytest.mark.parametrize(
    ("queues", "status", "error"),
    [
        ("a,_b", 400, "queue name contains forbidden characters"),
        ("a,b.c", 400, "queue name contains forbidden characters"),
        ("a," + "b" * 256, 400, "namespace or queue name too long"),
        (",,", 400, "invalid queue name(s)"),
    ],
)
async def test_bad_queue_lists_on_consume(api: Api, queues: str, status: int, error: str) -> None:
    response = await api.consume(queues)
    assert (response.status_code, response.json()) == (status, {"error": error})


BAD_UINTS = ["+1", " 1", "1.0", "-1", "1_0", "", "abc"]


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("PUT", "/api/ns/q", "delay"),
        ("PUT", "/api/ns/q", "ttl"),
        ("PUT", "/api/ns/q", "tries"),
        ("PUT", "/api/ns/q/bulk", "delay"),
        ("PUT", "/api/ns/q/job/{id}", "tries"),
        ("GET", "/api/ns/q", "ttr"),
        ("GET", "/api/ns/q", "timeout"),
        ("GET", "/api/ns/q,r", "count"),
        ("PUT", "/api/ns/q/deadletter", "limit"),
        ("PUT", "/api/ns/q/deadletter", "ttl"),
        ("DELETE", "/api/ns/q/deadletter", "limit"),
    ],
)
async def test_bad_numbers(api: Api, method: str, path: str, name: str) -> None:
    for value in BAD_UINTS:
        response = await api.client.request(
            method, _url(path, "ns"), params={name: value}, content=b"[1]", headers=api.headers
        )
        assert (response.status_code, response.json()) == (400, {"error": f"invalid {name}"}), value


@pytest.mark.parametrize(
    ("method", "path", "query", "error"),
    [
        ("PUT", "/api/ns/q", {"delay": 4294967296}, "invalid delay"),
        ("PUT", "/api/ns/q", {"ttl": 4294967296}, "invalid ttl"),
        ("PUT", "/api/ns/q", {"tries": 65536}, "invalid tries"),
        ("PUT", "/api/ns/q", {"delay": 10, "ttl": 5}, "ttl is shorter than delay"),
        ("PUT", "/api/ns/q/bulk", {"delay": 10, "ttl": 5}, "ttl is shorter than delay"),
        ("PUT", "/api/ns/q", {"tries": 0}, "tries shouldn't be zero"),
        ("PUT", "/api/ns/q/bulk", {"tries": 0}, "tries shouldn't be zero"),
        ("GET", "/api/ns/q", {"ttr": 4294967296}, "invalid ttr"),
        ("GET", "/api/ns/q", {"count": 0}, "invalid count"),
        ("GET", "/api/ns/q", {"count": 101}, "invalid count"),
        ("PUT", "/api/ns/q/deadletter", {"limit": 0}, "invalid limit"),
        ("DELETE", "/api/ns/q/deadletter", {"limit": 0}, "invalid limit"),
    ],
)
async def test_out_of_range_numbers(api: Api, method: str, path: str, query: dict[str, int], error: str) -> None:
    response = await api.client.request(method, path, params=query, content=b"[1]", headers=api.headers)
    assert (response.status_code, response.json()) == (400, {"error": error})


async def test_ttl_zero_allows_any_delay(api: Api) -> None:
    response = await api.client.put("/api/ns/q", params={"delay": 100, "ttl": 0}, headers=api.headers)
    assert response.status_code == 201
    assert ids.delay_seconds(response.json()["job_id"]) == 100


# A job id is ours (a ULID) or one a business chose: 1..128 of [-_.:A-Za-z0-9] (SPEC section 7). So
# "x" or a malformed ULID may name a job (404 when none has it); outside the rule, 400.
INVALID_JOB_IDS = ["x!", "a" * 129, "%C3%BC", "a%20b", "01M80JVX6YFR8Y2R2KJ4000000%2B"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_invalid_job_id(api: Api, method: str) -> None:
    for job_id in INVALID_JOB_IDS:
        response = await api.client.request(method, f"/api/ns/q/job/{job_id}", headers=api.headers)
        assert (response.status_code, response.json()) == (400, {"error": "invalid job id"}), job_id


# -- routing and request ids ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/api"),
        ("GET", "/api/ns"),
        ("GET", "/api/ns/q/nope"),
        ("GET", "/api/ns/q/job/x/y"),
        ("POST", "/api/ns/q"),
        ("PATCH", "/api/ns/q"),
        ("HEAD", "/api/ns/q"),  # would consume a job if HEAD were routed like GET
        ("POST", "/api/ns/q/peek"),
        ("PUT", "/api/ns/q/size"),
        ("GET", "/api/ns/q/bulk"),
        ("POST", "/api/ns/q/deadletter"),
    ],
)
async def test_unknown_routes_and_methods(api: Api, method: str, path: str) -> None:
    job_id = await api.publish()
    response = await api.client.request(method, path, headers=api.headers)
    assert response.status_code == 404
    if method != "HEAD":
        assert response.json() == {"error": "api not found"}
    assert len(response.headers["x-request-id"]) == 32
    assert (await api.get("/peek")).json()["job_id"] == job_id


async def test_request_id_on_every_response(api: Api) -> None:
    responses = [
        await api.client.put("/api/ns/q", headers=api.headers),  # 201
        await api.consume(),  # 200
        await api.consume(),  # 404 msg
        await api.client.get("/api/ns/q"),  # 401
        await api.client.get("/api/ns/q/nope"),  # 404 route
        await api.client.delete("/api/ns/q", headers=api.headers),  # 204
    ]
    assert [r.status_code for r in responses] == [201, 200, 404, 401, 404, 204]
    request_ids = {r.headers["x-request-id"] for r in responses}
    assert len(request_ids) == len(responses)


async def test_request_id_is_reused_when_sane(api: Api) -> None:
    response = await api.client.get("/api/ns/q/size", headers={"X-Request-ID": "abc-123_x.y"})
    assert response.headers["x-request-id"] == "abc-123_x.y"
    for insane in ("a b", "x" * 129, "", "a\tb", "<script>"):
        response = await api.client.get("/api/ns/q/size", headers={"X-Request-ID": insane})
        assert response.headers["x-request-id"] != insane and len(response.headers["x-request-id"]) == 32


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/api/ns/%00"),
        ("GET", "/api/%E2%82%AC/q"),
        ("GET", "/api/ns/q%2Fpeek"),
        ("PUT", "/api/ns/q?delay=99999999999999999999999999999"),
        ("PUT", "/api/ns/q?tries=%00"),
        ("GET", "/api/ns/q?count=1&count=x&token=%FF"),
        ("PUT", "/api/ns/q/job/%FF"),
        ("GET", "/api/ns/q/job/0000000000000000000000000000000000"),
        ("PUT", "/api/ns/q/bulk?ttl=1&delay=1"),
        ("GET", "/api/ns/q/job/01M80JVX6YFR8Y2R2KJ4000000%0A"),
        ("PUT", "/api/ns/q/job/01M80JVX6YFR8Y2R2KJ4000000%0A"),
        ("GET", "/api/ns%0A/q/size"),
    ],
)
async def test_odd_input_never_gives_a_server_error(api: Api, method: str, url: str) -> None:
    response = await api.client.request(method, url, headers=api.headers, content=b"\x00\xff[")
    assert response.status_code < 500, response.text
    assert "error" in response.json() or "job_id" in response.json() or "msg" in response.json()
