"""Scoped tokens on the data plane (SPEC 15): every route answers 403 to a token without its scope or
whose queue patterns miss the queue, after the name, pool and token checks and before anything else;
tokens without scopes (lmstfy's, and every one made before) change nothing.

On the standalone Redis only: the grant is read by one admin script and checked in the web layer,
the same for every pool kind (tests/admin/test_token_store.py holds the storage).
"""

from __future__ import annotations

import httpx
import pytest

from lmstfy_py.runtime import Runtime
from lmstfy_py.store import keys
from lmstfy_py.web import data as data_app
from tests.web.conftest import auth
from tests.web.test_dashboard import csrf_token, post

FORBIDDEN = {"error": "token scope forbids this"}
JOB = "/api/ns/q/job/a-job"
DEAD_JOB = "/api/ns/q/deadletter/job/a-job"
# Every data route with its scopes (all needed), as SPEC 15's table gives them.
ROUTES = [
    ("PUT", "/api/ns/q", {"publish"}),
    ("PUT", "/api/ns/q/bulk", {"publish"}),
    ("PUT", JOB, {"publish", "consume"}),
    ("GET", "/api/ns/q", {"consume"}),
    ("DELETE", JOB, {"consume"}),
    ("DELETE", "/api/ns/q/jobs", {"consume"}),
    ("PUT", JOB + "/complete", {"consume"}),
    ("PUT", JOB + "/release", {"consume"}),
    ("PUT", JOB + "/touch", {"consume"}),
    ("PUT", JOB + "/bury", {"consume"}),
    ("GET", "/api/ns/q/peek", {"read"}),
    ("GET", JOB, {"read"}),
    ("GET", "/api/ns/q/stats", {"read"}),
    ("GET", "/api/ns/q/deadletter", {"read"}),
    ("GET", "/api/ns/q/deadletter/jobs", {"read"}),
    ("GET", JOB + "/result", {"read"}),
    ("GET", "/api/ns/q/events", {"read"}),
    ("GET", "/api/ns/q/settings", {"read"}),
    ("GET", "/api/ns/q/cron", {"read"}),
    ("GET", "/api/ns/q/cron/daily", {"read"}),
    ("PUT", "/api/ns/q/pause", {"manage"}),
    ("DELETE", "/api/ns/q/pause", {"manage"}),
    ("PUT", "/api/ns/q/settings", {"manage"}),
    ("PUT", "/api/ns/q/deadletter", {"manage"}),
    ("DELETE", "/api/ns/q/deadletter", {"manage"}),
    ("PUT", DEAD_JOB, {"manage"}),
    ("DELETE", DEAD_JOB, {"manage"}),
    ("PUT", "/api/ns/q/cron/daily", {"manage"}),
    ("DELETE", "/api/ns/q/cron/daily", {"manage"}),
    ("PUT", JOB + "/promote", {"manage"}),
    ("DELETE", "/api/ns/q", {"manage"}),
]
OPEN = [("GET", "/api/ns/q/size"), ("GET", "/api/ns/q/deadletter/size")]
SCOPES = ("publish", "consume", "read", "manage")


@pytest.fixture
def runtime(standalone_web_runtime: Runtime) -> Runtime:
    """tests/conftest.py's `data` and `admin` clients on the standalone Redis alone."""
    return standalone_web_runtime


async def scoped(admin: httpx.AsyncClient, scope: str | None = None, queues: str | None = None) -> dict[str, str]:
    """The headers of a new token of namespace "ns" with these scopes and queue patterns."""
    given = {"scope": scope, "queues": queues}
    form = {"description": "scoped", **{name: value for name, value in given.items() if value is not None}}
    response = await admin.post("/token/ns", params=form)
    assert response.status_code == 201, response.text
    return auth(response.json()["token"])


def test_the_table_names_every_data_route() -> None:
    served = {(method, route.path) for route in data_app.ROUTES for method in route.methods or ()}
    listed = {(method, _pattern(path)) for method, path, _ in ROUTES} | {(m, _pattern(p)) for m, p in OPEN}
    assert listed == served


def _pattern(path: str) -> str:
    parts = path.split("/")
    named = ["", "api", "{ns}", "{queue}", *parts[4:]]
    if len(parts) > 5 and parts[4] in ("job", "cron"):
        named[5] = "{job_id}" if parts[4] == "job" else "{name}"
    if len(parts) > 6 and parts[5] == "job":
        named[6] = "{job_id}"
    return "/".join(named)


@pytest.mark.parametrize(("method", "path", "needed"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
async def test_each_route_needs_its_scope(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, method: str, path: str, needed: set[str]
) -> None:
    for missing in needed:
        others = ",".join(scope for scope in SCOPES if scope != missing)
        refused = await data.request(method, path, headers=await scoped(admin, others), content=b"[1]")
        assert (refused.status_code, refused.json()) == (403, FORBIDDEN), f"without {missing}"
    wrong_queue = await data.request(method, path, headers=await scoped(admin, queues="other-*"), content=b"[1]")
    assert (wrong_queue.status_code, wrong_queue.json()) == (403, FORBIDDEN)
    allowed = await data.request(method, path, headers=await scoped(admin, ",".join(needed), "q"), content=b"[1]")
    assert allowed.status_code != 403, allowed.text


async def test_size_routes_stay_open(admin: httpx.AsyncClient, data: httpx.AsyncClient) -> None:
    nothing_here = await scoped(admin, "publish", "other")
    for method, path in OPEN:
        assert (await data.request(method, path, headers=nothing_here)).status_code == 200
        assert (await data.request(method, path)).status_code == 200


async def test_scope_is_checked_before_any_parameter_after_the_token(
    admin: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    reader = await scoped(admin, "read")
    refused = await data.put("/api/ns/q", params={"delay": "soon"}, headers=reader)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
    refused = await data.put("/api/ns/q/job/not%20an%20id", headers=reader)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
    refused = await data.put("/api/ns/q/cron/bad%20name", headers=reader)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
    publisher = await scoped(admin, "publish")
    assert (await data.put("/api/ns/q", params={"delay": "soon"}, headers=publisher)).status_code == 400
    # Before it: the names (400), the pool (404) and the token (401).
    assert (await data.put("/api/ns/bad.name", headers=reader)).status_code == 400
    other_pool = {"X-Token": "nope:" + reader["X-Token"]}
    assert (await data.put("/api/ns/q", headers=other_pool)).status_code == 404
    assert (await data.put("/api/ns/q", headers={"X-Token": "x" * 32})).status_code == 401
    assert (await data.put("/api/other-ns/q", headers=reader)).status_code == 401


async def test_queue_patterns_are_case_sensitive_globs_on_the_whole_name(
    admin: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    token = await scoped(admin, "publish", "orders-*,x?,[a-c]1,[!a-c]2")
    for queue in ("orders-1", "orders-", "xy", "b1", "z2"):
        assert (await data.put(f"/api/ns/{queue}", headers=token)).status_code == 201, queue
    for queue in ("Orders-1", "my-orders-1", "xyz", "x", "d1", "a2"):
        refused = await data.put(f"/api/ns/{queue}", headers=token)
        assert (refused.status_code, refused.json()) == (403, FORBIDDEN), queue


async def test_a_multi_queue_consume_needs_every_queue(admin: httpx.AsyncClient, data: httpx.AsyncClient) -> None:
    token = await scoped(admin, "consume,read", "orders-*")
    assert (await data.get("/api/ns/orders-1,orders-2", headers=token)).status_code == 404  # no job, allowed
    refused = await data.get("/api/ns/orders-1,other", headers=token)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
    for no_queue in (",", ",,"):  # a name error, so a 400 before the scope's 403
        refused = await data.get(f"/api/ns/{no_queue}", headers=token)
        assert (refused.status_code, refused.json()) == (400, {"error": "invalid queue name(s)"}), no_queue
    merged = await data.get("/api/ns/events", params={"queues": "orders-1,other"}, headers=token)
    assert (merged.status_code, merged.json()) == (403, FORBIDDEN)
    merged = await data.get("/api/ns/events", params={"queues": "orders-1,orders-2"}, headers=token)
    assert merged.status_code == 409  # events are off for these queues: past the scope check


async def test_a_consume_acks_only_in_queues_its_token_may_consume(
    admin: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    # `ack=QUEUE:ID` may name any queue of the namespace: the token must cover each one named.
    everything = await scoped(admin)
    job_id = (await data.put("/api/ns/payments", headers=everything, content=b"pay")).json()["job_id"]
    assert (await data.get("/api/ns/payments", params={"ttr": 60}, headers=everything)).status_code == 200
    token = await scoped(admin, "consume", "orders-*")
    for ack in (f"payments:{job_id}", f"orders-2:x,payments:{job_id}"):
        refused = await data.get("/api/ns/orders-1", params={"ack": ack}, headers=token)
        assert (refused.status_code, refused.json()) == (403, FORBIDDEN), ack
    shown = await data.get(f"/api/ns/payments/job/{job_id}", headers=everything)
    assert (shown.status_code, shown.json()["state"]) == (200, "reserved")  # not ACKed
    allowed = await data.get("/api/ns/orders-1", params={"ack": "orders-2:x"}, headers=token)
    assert allowed.status_code == 404  # no job: the ACKs were allowed, the consume found nothing


async def test_a_refused_request_changes_nothing_and_takes_no_throttle_unit(
    admin: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    token = await scoped(admin, "publish", "a*")
    limit = {"read": 0, "write": 1, "interval": 60}
    assert (await admin.post(f"/token/ns/{token['X-Token']}/limit", json=limit)).status_code == 201
    for _ in range(3):
        assert (await data.put("/api/ns/b", headers=token)).status_code == 403
    assert (await data.get("/api/ns/b/size")).json()["size"] == 0
    assert (await data.put("/api/ns/a1", headers=token)).status_code == 201  # the window's one unit was left
    assert (await data.put("/api/ns/a1", headers=token)).status_code == 429


async def test_unrestricted_tokens_answer_as_lmstfy(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, standalone_web_runtime: Runtime
) -> None:
    # A token as lmstfy writes it: one field of its hash, nothing beside it.
    lmstfy_token = "made-by-lmstfy-0123456789"
    await standalone_web_runtime.tokens.redis.hset(keys.tokens("default", "ns"), lmstfy_token, "lmstfy's")
    plain = await scoped(admin)
    assert (await admin.get("/token/ns")).json() == {"tokens": {lmstfy_token: "lmstfy's", plain["X-Token"]: "scoped"}}
    for headers in (auth(lmstfy_token), plain):
        published = await data.put("/api/ns/q", headers=headers)
        assert published.status_code == 201
        assert (await data.put("/api/ns/q/pause", headers=headers)).status_code == 200
        assert (await data.delete(f"/api/ns/q/job/{published.json()['job_id']}", headers=headers)).status_code == 204
        assert (await data.delete("/api/ns/q", headers=headers)).status_code == 204


async def test_creating_and_listing_scoped_tokens(admin: httpx.AsyncClient) -> None:
    plain = (await admin.post("/token/ns", params={"description": "plain"})).json()["token"]
    form = {"description": "workers", "scope": "read,consume,read", "queues": "orders-*,x"}
    worker = (await admin.post("/token/ns", data=form)).json()["token"]  # a form body, as lmstfy's params
    only_queues = (await admin.post("/token/ns", params={"description": "q", "queues": "a?"})).json()["token"]
    assert (await admin.get("/token/ns")).json() == {
        "tokens": {plain: "plain", worker: "workers", only_queues: "q"},
        "scopes": {
            plain: {"scope": None, "queues": None},
            worker: {"scope": ["consume", "read"], "queues": ["orders-*", "x"]},
            only_queues: {"scope": None, "queues": ["a?"]},
        },
    }
    assert (await admin.delete(f"/token/ns/{worker}")).status_code == 204
    assert (await admin.get("/token/ns")).json()["scopes"] == {
        only_queues: {"scope": None, "queues": ["a?"]},
        plain: {"scope": None, "queues": None},
    }


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"scope": ""}, "invalid scope"),
        ({"scope": "publish,admin"}, "invalid scope"),
        ({"scope": "publish,"}, "invalid scope"),
        ({"scope": "Publish"}, "invalid scope"),
        ({"queues": ""}, "invalid queues"),
        ({"queues": "a,,b"}, "invalid queues"),
        ({"queues": "a/b"}, "invalid queues"),
        ({"queues": "a b"}, "invalid queues"),
        ({"queues": "{a,b}"}, "invalid queues"),
    ],
)
async def test_bad_scopes_and_queues_are_400_and_create_nothing(
    admin: httpx.AsyncClient, given: dict[str, str], error: str
) -> None:
    response = await admin.post("/token/ns", params={"description": "d", **given})
    assert (response.status_code, response.json()) == (400, {"error": error})
    assert (await admin.get("/token/ns")).json() == {"tokens": {}}


async def test_the_dashboard_creates_and_shows_scoped_tokens(admin: httpx.AsyncClient) -> None:
    csrf = await csrf_token(admin, "/ui/tokens")
    fields = {"csrf": csrf, "namespace": "ns", "description": "d", "scope": "consume, read", "queues": ""}
    refused = await post(admin, "/ui/tokens/create", fields)
    assert refused.status_code == 400 and "invalid scope" in refused.text
    created = await post(admin, "/ui/tokens/create", {**fields, "scope": "consume,read", "queues": "orders-*"})
    assert created.status_code == 201
    page = (await admin.get("/ui/tokens")).text
    assert '<td class="token-scope">consume, read</td>' in page and '<td class="token-queues">orders-*</td>' in page
    await post(admin, "/ui/tokens/create", {"csrf": csrf, "namespace": "ns", "description": "plain"})
    assert '<td class="token-scope">all</td>' in (await admin.get("/ui/tokens")).text


@pytest.mark.parametrize(
    "stored", ["not json", '{"scope":["publish","fly"],"queues":null}', "[1]", '{"scope":"publish"}']
)
async def test_an_unreadable_stored_grant_refuses_the_token_every_scope(
    runtime: Runtime, admin: httpx.AsyncClient, data: httpx.AsyncClient, stored: str
) -> None:
    """A grant edited by hand or by a later version answered 500 to every request of its token."""
    headers = await scoped(admin, "publish")
    await runtime.pools.own("default").redis.hset(keys.token_grants("default", "ns"), headers["X-Token"], stored)
    refused = await data.put("/api/ns/q", headers=headers)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
