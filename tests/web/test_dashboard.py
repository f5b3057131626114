"""The dashboard's pages, forms and rate history through the admin app, on real Redis servers.

What a browser does with them (refresh, clicks, the request log) is tests/e2e/test_dashboard_browser.py;
here: the CSRF rules a forged request meets, every form's effect on the stores, errors as pages,
basic auth on /ui, and the rates counted per queue and minute, on a standalone Redis and on
Redis Clusters (the `runtime` fixture).
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from lmstfy_py.admin.limits import Limit
from lmstfy_py.admin.pushers import Pusher
from lmstfy_py.admin.rates import EXPIRE_S, RateCounter, Rates, RateStore
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.schedules import Schedule
from lmstfy_py.types import Backoff, NewJob, SettingsChange, TraceContext
from lmstfy_py.web import create_admin_app
from lmstfy_py.web.dashboard import charts, display
from lmstfy_py.web.dashboard import cron as cron_page
from lmstfy_py.web.dashboard import pushers as pushers_page
from lmstfy_py.web.dashboard import queue as queue_page
from tests.conftest import client_for, free_port
from tests.web.conftest import MakeToken, wait_for
from tests.web.test_auth import ACCOUNTS, CHALLENGE, basic

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
_TOKEN_FIELD = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


async def csrf_token(admin: httpx.AsyncClient, path: str = "/ui/tokens") -> str:
    """The CSRF token of a page's forms; the client keeps the cookie it came with."""
    page = await admin.get(path)
    assert page.status_code == 200, page.text
    found = _TOKEN_FIELD.search(page.text)
    assert found is not None
    return found.group(1)


async def post(admin: httpx.AsyncClient, path: str, fields: dict[str, str], **headers: str) -> httpx.Response:
    return await admin.post(path, data=fields, headers={**FORM, **headers})


async def paused(runtime: Runtime, ns: str = "ns", queue: str = "q") -> bool:
    return (await runtime.pools.get("default").stats(ns, queue)).paused


# -- CSRF -----------------------------------------------------------------------------------


async def test_a_form_with_the_pages_token_acts(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    token = await csrf_token(admin)
    answer = await post(admin, "/ui/queue/ns/q/pause", {"csrf": token})
    assert (answer.status_code, answer.headers["location"]) == (303, "/ui/queue/ns/q?pool=default&done=paused")
    assert await paused(runtime)
    page = await admin.get(answer.headers["location"])
    assert "Queue paused: nothing is delivered from it until it is resumed." in page.text


@pytest.mark.parametrize(
    ("case", "headers"),
    [
        ("no token", {}),
        ("a token of another browser", {}),
        ("from another origin", {"Origin": "http://evil.test"}),
        ("cross-site by the browser's word", {"Sec-Fetch-Site": "cross-site"}),
        ("no cookie", {}),
    ],
)
async def test_a_forged_form_is_refused(
    admin: httpx.AsyncClient, runtime: Runtime, case: str, headers: dict[str, str]
) -> None:
    token = await csrf_token(admin)
    fields = {"csrf": token}
    if case == "no token":
        fields = {}
    elif case == "a token of another browser":
        async with client_for(create_admin_app(runtime)) as other:
            fields = {"csrf": await csrf_token(other)}
    elif case == "no cookie":
        admin.cookies.clear()
    answer = await post(admin, "/ui/queue/ns/q/pause", fields, **headers)
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert "refused" in answer.text
    assert not await paused(runtime)


async def test_a_link_or_a_non_form_body_never_acts(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    token = await csrf_token(admin)
    as_query = await admin.post("/ui/queue/ns/q/pause", params={"csrf": token})
    assert as_query.status_code == 400  # fields come from the form body only
    as_json = await admin.post("/ui/queue/ns/q/pause", json={"csrf": token})
    assert as_json.status_code == 400
    assert (await admin.get("/ui/queue/ns/q/pause")).status_code == 404
    assert not await paused(runtime)


async def test_every_process_accepts_what_another_signed(redis_url: str) -> None:
    """Two runtimes (two workers, or two instances) share the secret through the admin Redis."""
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    first, second = await Runtime.start(config, run_pumps=False), await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(first)) as one, client_for(create_admin_app(second)) as two:
            token = await csrf_token(one)
            two.cookies = one.cookies
            answer = await post(two, "/ui/queue/ns/q/pause", {"csrf": token})
            assert answer.status_code == 303
    finally:
        await first.stop()
        await second.stop()


# -- pages and forms ---------------------------------------------------------------------------


async def test_pages_carry_a_policy_that_loads_nothing_from_elsewhere(admin: httpx.AsyncClient) -> None:
    page = await admin.get("/ui")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert "http://" not in page.text.replace("http://test", "") and "https://" not in page.text
    for asset in re.findall(r'(?:href|src)="(/ui/static/[^"]+)"', page.text):
        found = await admin.get(asset.replace("&amp;", "&"))
        assert found.status_code == 200 and "immutable" in found.headers["cache-control"]
        assert b"http://" not in found.content and b"https://" not in found.content
    assert (await admin.get("/ui/static/nothing.js")).status_code == 404


async def test_the_overview_shows_counts_pause_and_totals(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    await engine.publish_many("shop", "carts", [NewJob(b"a"), NewJob(b"b")])
    await engine.publish("shop", "mails", NewJob(b"later", delay_ms=600_000))
    await engine.pause("shop", "mails", True)
    await runtime.tokens.create("default", "tokens-only", "no job yet")
    page = (await admin.get("/ui")).text
    assert re.search(r'data-queue="shop/carts">.*?data-col="ready">2<', page, re.S)
    assert re.search(r'data-queue="shop/mails">.*?paused.*?data-col="delayed">1<', page, re.S)
    assert 'data-namespace="tokens-only"' in page and "only has tokens" in page
    assert 'data-total="ready">2<' in page
    only = (await admin.get("/ui", params={"ns": "tokens-only"})).text
    assert 'data-queue="shop/carts"' not in only


async def test_a_job_and_its_data_as_text_or_binary(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    text = (await engine.publish("ns", "q", NewJob("<b>é</b>".encode()))).job_id
    binary = (await engine.publish("ns", "q", NewJob(b"\x00\x01\xff"))).job_id
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": text})).text
    assert "&lt;b&gt;é&lt;/b&gt;" in page and "<b>é</b>" not in page  # escaped, not markup
    assert "data-job-state>ready<" in page
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": binary})).text
    assert "00 01 ff" in page and "AAH/" in page  # hex and base64
    missing = (await admin.get("/ui/queue/ns/q", params={"job_id": "nope"})).text
    assert "No job <code>nope</code> in this queue" in missing


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/ui/queue/bad!name/q", 400, "namespace name contains forbidden characters"),
        ("/ui/queue/ns/q?pool=nowhere", 400, "pool not found"),
        ("/ui/queue/ns/q?job_id=bad%20id", 400, "invalid job id"),
        ("/ui/deadletter/ns/q?after=unknown", 404, "the job `after` names is not in the dead letter"),
    ],
)
async def test_errors_are_pages(admin: httpx.AsyncClient, path: str, status: int, message: str) -> None:
    answer = await admin.get(path)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/html")
    assert f'id="error-message">{message}<' in answer.text.replace("&#96;", "`")


async def test_destroy_and_the_dead_letter_need_a_confirmation(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    await engine.publish("ns", "q", NewJob(b"ready"))
    for _ in range(3):
        job_id = (await engine.publish("ns", "q", NewJob(b"dying"))).job_id
        await engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=2)
        await engine.bury("ns", "q", job_id, "boom")
    token = await csrf_token(admin)
    asked = await post(admin, "/ui/deadletter/ns/q/delete", {"csrf": token})
    assert asked.status_code == 200 and "Deletes the 3 dead jobs" in asked.text
    assert 'name="count" value="3"' in asked.text and await engine.dead_letter_size("ns", "q") == 3
    done = await post(admin, "/ui/deadletter/ns/q/respawn", {"csrf": token, "confirm": "yes", "count": "2"})
    assert done.headers["location"].endswith("done=respawned&n=2")
    assert await engine.dead_letter_size("ns", "q") == 1  # as many as confirmed, oldest first
    asked = await post(admin, "/ui/queue/ns/q/destroy", {"csrf": token})
    assert "Destroy queue ns/q?" in asked.text and (await engine.stats("ns", "q")).ready > 0
    done = await post(admin, "/ui/queue/ns/q/destroy", {"csrf": token, "confirm": "yes"})
    assert done.status_code == 303 and (await engine.stats("ns", "q")).ready == 0


async def test_tokens_and_limits_from_forms(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    token = await csrf_token(admin, "/ui/tokens")
    created = await post(admin, "/ui/tokens/create", {"csrf": token, "namespace": "ns", "description": "d"})
    assert created.status_code == 201
    found = re.search(r'id="new-token">([0-9a-f]{32})<', created.text)
    assert found is not None and await runtime.tokens.exists("default", "ns", found.group(1))
    new = found.group(1)
    limit = {"csrf": token, "namespace": "ns", "token": new, "read": "5", "write": "0", "interval": "10"}
    assert (await post(admin, "/ui/tokens/limit", limit)).status_code == 303
    assert await runtime.limits.get("default", "ns", new) == Limit(5, 0, 10)
    refused = await post(admin, "/ui/tokens/limit", {**limit, "read": "0"})
    assert refused.status_code == 400 and "can&#39;t both be 0" in refused.text
    short = await post(admin, "/ui/tokens/create", {"csrf": token, "namespace": "ns", "description": "d", "token": "x"})
    assert short.status_code == 400 and "the user token was too short" in short.text
    deleting = {"csrf": token, "namespace": "ns", "token": new}
    assert "Delete a token of ns?" in (await post(admin, "/ui/tokens/delete", deleting)).text
    assert await runtime.tokens.exists("default", "ns", new)
    assert (await post(admin, "/ui/tokens/delete", {**deleting, "confirm": "yes"})).status_code == 303
    assert await runtime.limits.get("default", "ns", new) is None
    assert (await runtime.tokens.list_tokens("default", "ns")) == {}


# -- basic auth ----------------------------------------------------------------------------------


@pytest.fixture
async def secured_admin(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    config = Config(pools={"default": PoolConfig("default", url=redis_url)}, accounts=ACCOUNTS)
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as client:
            yield client
    finally:
        await runtime.stop()


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/ui"), ("GET", "/ui/static/dashboard.css"), ("POST", "/ui/tokens/create")]
)
async def test_the_dashboard_needs_an_account(secured_admin: httpx.AsyncClient, method: str, path: str) -> None:
    answer = await secured_admin.request(method, path)
    assert (answer.status_code, answer.headers["www-authenticate"]) == (401, CHALLENGE)
    allowed = await secured_admin.request(method, path, headers=basic("alice", ACCOUNTS["alice"]))
    assert allowed.status_code in (200, 400)  # 400: the POST had no form


# -- rates ---------------------------------------------------------------------------------------


async def test_rates_count_publishes_and_consumes_per_queue(runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    await engine.publish_many("ns", "a", [NewJob(b"1"), NewJob(b"2"), NewJob(b"3")])
    await engine.publish("ns", "b", NewJob(b"x", job_id="order-1"))
    await engine.publish("ns", "b", NewJob(b"x", job_id="order-1"))  # a duplicate stores nothing, counts nothing
    await engine.consume("ns", ["b", "a"], ttr_ms=60_000, timeout_ms=0, count=3)
    await runtime.rates.flush()
    history = await runtime.rates.history("default")
    # Sums over the hour: the work may straddle a minute's end.
    assert (sum(history.of("ns", "a").published), sum(history.of("ns", "a").consumed)) == (3, 2)
    assert (sum(history.of("ns", "b").published), sum(history.of("ns", "b").consumed)) == (1, 1)
    assert sum(history.total().published) == 4 and sum(history.of_namespace("ns").consumed) == 3
    one = await runtime.rates.history("default", only=("ns", "a"))
    assert list(one.queues) == [("ns", "a")] and sum(one.of("ns", "a").published) == 3
    assert len(history.of("ns", "a").published) == 60 and history.of("ns", "nothing").published == [0] * 60
    admin_redis = runtime.pools.own("default").redis
    written = [key async for key in admin_redis.scan_iter(match="rt/default/*")]
    assert written and all(0 < ttl <= EXPIRE_S for ttl in [await admin_redis.ttl(key) for key in written])


async def test_counts_of_several_processes_add_up(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    stores = [RateStore(redis, RateCounter()) for _ in range(2)]
    try:
        for store in stores:
            store.counter.published("default", "ns", "q", [NewJob(b"")] * 2, None)
            await store.flush()
        assert sum((await stores[0].history("default")).of("ns", "q").published) == 4
    finally:
        await redis.aclose()


async def test_a_read_during_a_flush_misses_no_count(redis_url: str) -> None:
    # Each count is in Redis or still in the process when a read looks: a read interleaved with a
    # flush (reading Redis before the flush's write, the process after it) showed none of them.
    redis = Redis.from_url(redis_url)
    store = RateStore(redis, RateCounter())
    try:
        for made in range(1, 41):
            store.counter.published("default", "ns", "raced", [NewJob(b"")], None)
            reading, flushing = store.history("default", only=("ns", "raced")), store.flush()
            if made % 2:  # either one first
                read, _ = await asyncio.gather(reading, flushing)
            else:
                _, read = await asyncio.gather(flushing, reading)
            assert sum(read.of("ns", "raced").published) == made, made
    finally:
        await redis.aclose()


async def test_counts_a_flush_could_not_write_wait_for_the_next(redis_url: str) -> None:
    counter = RateCounter()
    counter.published("default", "ns", "q", [NewJob(b"")] * 5, None)
    away = Redis.from_url(f"redis://127.0.0.1:{free_port()}")  # nothing listens there
    working = Redis.from_url(redis_url)
    try:
        with pytest.raises(Exception, match="onnect"):
            await RateStore(away, counter).flush()
        counter.published("default", "ns", "q", [NewJob(b"")], None)
        await RateStore(working, counter).flush()
        assert sum((await RateStore(working, RateCounter()).history("default")).of("ns", "q").published) == 6
        assert counter.take() == {}  # written once, not kept to be written again
    finally:
        await away.aclose()
        await working.aclose()


# -- what pages show -------------------------------------------------------------------------------


def test_job_data_is_text_when_printable_utf8_else_hex_and_base64() -> None:
    assert display.data("héllo\n\tworld".encode()).text == "héllo\n\tworld"
    binary = display.data(b"\x00abc")
    assert (binary.text, binary.hex, binary.base64) == (None, "00 61 62 63", "AGFiYw==")
    assert display.data(b"\x1b[31mred").text is None  # a terminal escape is not shown as text
    long = display.data(("é" * 3000).encode())  # 6000 bytes, cut inside a character
    assert long.truncated and long.size == 6000 and long.text == "é" * 2048


def test_chart_scales() -> None:
    assert [charts.nice_ceiling(n) for n in (0, 1, 3, 7, 20, 21, 999, 1001)] == [1, 1, 5, 10, 20, 50, 1000, 2000]
    chart = charts.rate_chart(Rates([0] * 59 + [30], [0] * 60), "c")
    assert 'data-top="50"' in chart and chart.count('<path class="') == 2
    assert "last 60 minutes: 30 published, 0 consumed" in chart


# -- next jobs, push groups, recurring jobs ----------------------------------------------------


def next_job_ids(page: str) -> list[str]:
    return re.findall(r'data-next-job="([^"]+)"', page)


def form_error(page: str) -> str:
    found = re.search(r'id="form-error">([^<]*)<', page)
    assert found is not None, page
    return html.unescape(found.group(1))


async def test_the_queue_page_lists_the_next_jobs_in_delivery_order(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    await engine.publish_many("ns", "q", [NewJob(b"plain %d" % i) for i in range(11)])
    await engine.publish("ns", "q", NewJob(b"\x00\x01\xff", priority=5))
    await engine.publish("ns", "q", NewJob(b"later", delay_ms=600_000))
    page = (await admin.get("/ui/queue/ns/q")).text
    listed = next_job_ids(page)
    assert len(listed) == queue_page.NEXT_SHOWN and "data-next-paused" not in page
    assert "binary, 3 bytes: 00 01 ff" in page and "plain 0" in page and "later" not in page
    await engine.pause("ns", "q", True)
    paused_page = (await admin.get("/ui/queue/ns/q")).text
    assert next_job_ids(paused_page) == listed and "data-next-paused" in paused_page  # shown, marked paused
    await engine.pause("ns", "q", False)
    delivered = await engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=10)
    assert [job.job_id for job in delivered] == listed
    rest = next_job_ids((await admin.get("/ui/queue/ns/q")).text)
    assert len(rest) == 2 and rest[0] == (await engine.peek_queue("ns", "q")).job_id


SECRET = "a-secret-of-20-bytes"
GROUP_FORM = {"namespace": "shop", "group": "mailer", "queues": "mails, sms", "endpoint": "http://127.0.0.1:9/hook"}
GROUP_FORM |= {"workers": "2", "timeout": "5", "backoff": "exponential", "backoff_ms": "500", "max_attempts": "3"}


async def test_push_groups_from_forms(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    store = runtime.pushers
    token = await csrf_token(admin, "/ui/pushers")
    assert "No push group in this pool" in (await admin.get("/ui/pushers")).text
    created = await post(admin, "/ui/pushers/create", {"csrf": token, **GROUP_FORM, "secret": SECRET})
    assert (created.status_code, created.headers["location"]) == (303, "/ui/pushers?pool=default&done=pusher_created")
    expected = Pusher(("mails", "sms"), "http://127.0.0.1:9/hook", 2, 5, Backoff(500, 3_600_000), 3, SECRET)
    assert await store.get("default", "shop", "mailer") == expected
    listing = (await admin.get(created.headers["location"])).text
    row = re.search(r'data-pusher="shop/mailer">(.*?)</tr>', listing, re.S)
    assert row is not None and "http://127.0.0.1:9/hook" in row.group(1)
    assert re.search(r'data-col="signed"><span class="badge active">yes<', row.group(1))
    assert "500 to 3,600,000 ms" in row.group(1) and 'data-col="max_attempts">3<' in row.group(1)

    editing = (await admin.get("/ui/pushers", params={"ns": "shop", "group": "mailer"})).text
    assert 'name="queues" value="mails, sms"' in editing and 'name="stop_signing"' in editing
    assert SECRET not in listing and SECRET not in editing  # write-only
    # An empty secret keeps the current one; a field cleared is cleared (lmstfy's PUT would keep max_attempts).
    kept = {"csrf": token, **GROUP_FORM, "queues": "sms", "backoff": "fixed", "max_attempts": "", "secret": ""}
    assert (await post(admin, "/ui/pushers/edit", kept)).headers["location"].endswith("done=pusher_saved")
    expected = Pusher(("sms",), "http://127.0.0.1:9/hook", 2, 5, None, 0, SECRET)
    assert await store.get("default", "shop", "mailer") == expected
    renewed = "another-secret-of-20-bytes"
    assert (await post(admin, "/ui/pushers/edit", {**kept, "secret": renewed})).status_code == 303
    assert (await store.get("default", "shop", "mailer")) == Pusher(("sms",), expected.endpoint, 2, 5, secret=renewed)
    assert (await post(admin, "/ui/pushers/edit", {**kept, "stop_signing": "yes"})).status_code == 303
    assert (await store.get("default", "shop", "mailer")) == Pusher(("sms",), expected.endpoint, 2, 5)
    shown = (await admin.get("/pusher/shop/mailer")).json()["pusher"]  # the admin API sees the same
    assert (shown["queues"], shown["signed"]) == (["sms"], False)

    deleting = {"csrf": token, "namespace": "shop", "group": "mailer"}
    asked = await post(admin, "/ui/pushers/delete", deleting)
    assert "Delete push group mailer of shop?" in asked.text and await store.get("default", "shop", "mailer")
    done = await post(admin, "/ui/pushers/delete", {**deleting, "confirm": "yes"})
    assert done.headers["location"].endswith("done=pusher_deleted")
    assert await store.get("default", "shop", "mailer") is None


@pytest.mark.parametrize(
    ("form", "body"),
    [
        ({"workers": "0"}, {"workers": 0}),
        ({"workers": "two"}, {"workers": "two"}),
        ({"timeout": "3601"}, {"timeout": 3601}),
        ({"endpoint": "ftp://127.0.0.1/x"}, {"endpoint": "ftp://127.0.0.1/x"}),
        ({"endpoint": "no url"}, {"endpoint": "no url"}),
        ({"queues": ""}, {"queues": []}),
        ({"queues": "ok, _hidden"}, {"queues": ["ok", "_hidden"]}),
        ({"max_attempts": "-1"}, {"max_attempts": -1}),
        ({"backoff_ms": "10", "backoff_max_ms": "5"}, {"backoff_ms": 10, "backoff_max_ms": 5}),
        ({"secret": "short-secret-x"}, {"secret": "short-secret-x"}),
        ({"group": "bad!"}, {}),
    ],
)
async def test_a_refused_push_group_form_shows_the_apis_error(
    admin: httpx.AsyncClient, runtime: Runtime, form: dict[str, str], body: dict[str, Any]
) -> None:
    api_body = {"queues": ["mails", "sms"], "endpoint": "http://127.0.0.1:9/hook", "workers": 2, "timeout": 5}
    api_body |= {"backoff": "exponential", "backoff_ms": 500, "max_attempts": 3, **body}
    group = form.get("group", "mailer")
    api = await admin.post(f"/pusher/shop/{group}", json=api_body)
    assert api.status_code == 400
    token = await csrf_token(admin, "/ui/pushers")
    refused = await post(admin, "/ui/pushers/create", {"csrf": token, **GROUP_FORM, **form})
    assert (refused.status_code, form_error(refused.text)) == (400, api.json()["error"])
    assert await runtime.pushers.all() == {}
    for name, value in form.items():  # the form keeps what was typed, but a secret
        if name != "secret" and name in pushers_page.FORM_FIELDS:
            assert f'name="{name}" value="{html.escape(value)}"' in refused.text
    if "secret" in form:
        assert form["secret"] not in refused.text and "The secret you typed is not kept" in refused.text


async def test_a_duplicate_or_vanished_push_group_is_said_so_on_the_page(
    admin: httpx.AsyncClient, runtime: Runtime
) -> None:
    token = await csrf_token(admin, "/ui/pushers")
    assert (await post(admin, "/ui/pushers/create", {"csrf": token, **GROUP_FORM})).status_code == 303
    again = await post(admin, "/ui/pushers/create", {"csrf": token, **GROUP_FORM})
    api = await admin.post(
        "/pusher/shop/mailer", json={"queues": ["q"], "endpoint": "http://x/", "workers": 1, "timeout": 1}
    )
    assert (
        (again.status_code, form_error(again.text))
        == (api.status_code, api.json()["error"])
        == (409, api.json()["error"])
    )
    await runtime.pushers.delete("default", "shop", "mailer")
    gone = await post(admin, "/ui/pushers/edit", {"csrf": token, **GROUP_FORM})
    assert (gone.status_code, form_error(gone.text)) == (404, "the pusher was not found")
    assert await runtime.pushers.all() == {}


SCHEDULE_FORM = {"namespace": "shop", "queue": "reports", "name": "daily", "cron": "@daily", "tz": "Europe/Paris"}
SCHEDULE_FORM |= {"ttl": "600", "tries": "2", "priority": "3", "catchup": "none", "data": '{"report":\r\n"sales"}'}


async def test_schedules_from_forms(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    store = runtime.pools.get("default")
    assert "No namespace yet" in (await admin.get("/ui/cron")).text
    await runtime.tokens.create("default", "shop", "a tenant")
    assert "No schedule in this pool yet" in (await admin.get("/ui/cron")).text
    token = await csrf_token(admin, "/ui/cron")
    created = await post(admin, "/ui/cron/save", {"csrf": token, **SCHEDULE_FORM})
    assert (created.status_code, created.headers["location"]) == (
        303,
        "/ui/cron?ns=shop&pool=default&done=schedule_created",
    )
    state = await store.schedule("shop", "reports", "daily")
    schedule = state.schedule
    assert (schedule.cron, schedule.every_s, schedule.tz, schedule.ttl_ms) == (
        "0 0 * * *",
        None,
        "Europe/Paris",
        600_000,
    )
    assert (schedule.tries, schedule.priority, schedule.catchup) == (2, 3, "none")
    assert schedule.body == b'{"report":\n"sales"}'  # the text area's line ends as \n
    listing = (await admin.get(created.headers["location"])).text
    assert "Schedule created." in listing
    row = re.search(r'data-schedule="reports/daily">(.*?)</tr>', listing, re.S)
    assert row is not None and "cron <code>0 0 * * *</code>" in row.group(1)
    assert display.when(state.next_ms) in row.group(1) and "not yet" in row.group(1)
    assert (await admin.get("/cron/shop")).json()["schedules"][0]["next_ms"] == state.next_ms  # the admin API's view

    replacing = {**SCHEDULE_FORM, "cron": "", "every": "60", "tz": "", "ttl": "", "data": "tick"}
    replaced = await post(admin, "/ui/cron/save", {"csrf": token, **replacing})
    assert replaced.headers["location"].endswith("done=schedule_replaced")
    schedule = (await store.schedule("shop", "reports", "daily")).schedule
    assert (schedule.cron, schedule.every_s, schedule.tz, schedule.ttl_ms, schedule.body) == (
        None,
        60,
        "UTC",
        runtime.config.defaults.ttl * 1000,
        b"tick",
    )
    editing = (await admin.get("/ui/cron", params={"ns": "shop", "queue": "reports", "name": "daily"})).text
    assert 'name="every" value="60"' in editing and ">\ntick</textarea>" in editing

    deleting = {"csrf": token, "namespace": "shop", "queue": "reports", "name": "daily"}
    asked = await post(admin, "/ui/cron/delete", deleting)
    assert "Delete the schedule daily of shop/reports?" in asked.text and await store.schedules("shop")
    done = await post(admin, "/ui/cron/delete", {**deleting, "confirm": "yes"})
    assert done.headers["location"] == "/ui/cron?ns=shop&pool=default&done=schedule_deleted"
    assert await store.schedules("shop") == []


@pytest.mark.parametrize(
    "form",
    [
        {"cron": ""},
        {"every": "60"},
        {"cron": "61 * * * *"},
        {"cron": "@reboot"},
        {"cron": "0 0 30 2 *"},
        {"tz": "Mars/Olympus"},
        {"cron": "", "every": "0"},
        {"tries": "0"},
        {"priority": "256"},
        {"ttl": "-1"},
        {"catchup": "all"},
        {"name": "bad name"},
        {"queue": "_hidden"},
    ],
)
async def test_a_refused_schedule_form_shows_the_apis_error(
    admin: httpx.AsyncClient, data: httpx.AsyncClient, make_token: MakeToken, runtime: Runtime, form: dict[str, str]
) -> None:
    fields = {**SCHEDULE_FORM, **form}
    query = {key: fields[key] for key in cron_page.QUERY_FIELDS if fields.get(key)}
    path = f"/api/shop/{fields['queue']}/cron/{fields['name']}"
    api = await data.put(path, params=query, content=b"x", headers={"X-Token": await make_token("shop")})
    assert api.status_code == 400
    token = await csrf_token(admin, "/ui/cron")
    refused = await post(admin, "/ui/cron/save", {"csrf": token, **fields})
    assert (refused.status_code, form_error(refused.text)) == (400, api.json()["error"])
    assert await runtime.pools.get("default").schedules("shop") == []
    assert f'name="queue" value="{html.escape(fields["queue"])}"' in refused.text  # kept as typed


@pytest.mark.parametrize(
    "action", ["/ui/pushers/create", "/ui/pushers/edit", "/ui/pushers/delete", "/ui/cron/save", "/ui/cron/delete"]
)
@pytest.mark.parametrize("forgery", ["no token", "a token of another browser", "from another origin"])
async def test_forged_push_group_and_schedule_forms_are_refused(
    admin: httpx.AsyncClient, runtime: Runtime, action: str, forgery: str
) -> None:
    store = runtime.pools.get("default")
    await runtime.pushers.create("default", "shop", "mailer", Pusher(("mails",), "http://127.0.0.1:9/hook", 1, 5))
    await store.put_schedule("shop", Schedule("daily", "reports", "0 0 * * *", None, "UTC", b"x", 0, 1, 0, "one"))
    before = (await runtime.pushers.all(), await store.schedules("shop"))
    token, headers = await csrf_token(admin, "/ui/pushers"), {}
    if forgery == "a token of another browser":
        async with client_for(create_admin_app(runtime)) as other:
            token = await csrf_token(other, "/ui/cron")
    elif forgery == "from another origin":
        headers = {"Origin": "http://evil.test"}
    fields = {**GROUP_FORM, **SCHEDULE_FORM, "queues": "other", "every": "", "confirm": "yes"}
    if action == "/ui/pushers/create":
        fields["group"] = "newsletter"
    answer = await post(admin, action, fields if forgery == "no token" else {"csrf": token, **fields}, **headers)
    assert answer.status_code == 403 and "refused" in answer.text
    assert (await runtime.pushers.all(), await store.schedules("shop")) == before
    # The same form with this browser's token acts: the refusal was the forgery's.
    assert (await post(admin, action, {"csrf": await csrf_token(admin), **fields})).status_code == 303
    assert (await runtime.pushers.all(), await store.schedules("shop")) != before


async def test_the_recurring_page_shows_every_namespaces_schedules_until_one_is_chosen(
    admin: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A newcomer opening Recurring sees the schedules there are, not the first namespace's none."""
    store = runtime.pools.get("default")
    await runtime.tokens.create("default", "alpha", "first in order, no schedule")
    await store.put_schedule("shop", Schedule("daily", "reports", "0 0 * * *", None, "UTC", b"x", 0, 1, 0, "one"))
    await store.put_schedule("zoo", Schedule("tick", "beats", None, 60, "UTC", b"y", 0, 1, 0, "one"))
    every = (await admin.get("/ui/cron")).text
    for ns, schedule in (("shop", "reports/daily"), ("zoo", "beats/tick")):
        panel = re.search(rf'data-namespace="{ns}">(.*?)</table>', every, re.S)
        assert panel is not None and f'data-schedule="{schedule}"' in panel.group(1), every
        assert f"ns={ns}&amp;queue=" in panel.group(1)  # its Edit link opens it in its own namespace
        assert "1 schedule<" in panel.group(1)
    assert "No schedule in" not in every and 'data-namespace="alpha"' not in every
    assert '<option value="" selected>every namespace</option>' in every
    alpha = (await admin.get("/ui/cron", params={"ns": "alpha"})).text
    assert "No schedule in alpha." in alpha and "data-schedule=" not in alpha
    shop = (await admin.get("/ui/cron", params={"ns": "shop"})).text
    assert 'data-schedule="reports/daily"' in shop and 'data-schedule="beats/tick"' not in shop
    assert 'id="c-namespace" name="namespace" value="shop"' in shop


async def test_the_every_namespace_view_shows_at_most_max_schedules(
    admin: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cron_page, "MAX_SCHEDULES", 2)
    store = runtime.pools.get("default")
    for ns, name in (("a", "one"), ("b", "two"), ("b", "three")):
        await store.put_schedule(ns, Schedule(name, "q", None, 60, "UTC", b"x", 0, 1, 0, "one"))
    every = (await admin.get("/ui/cron")).text
    assert len(re.findall(r"data-schedule=", every)) == 2 and "Only the first 2 schedules are shown" in every
    assert len(re.findall(r"data-schedule=", (await admin.get("/ui/cron", params={"ns": "b"})).text)) == 2


_ONE_PLURAL = re.compile(r"\b1 (?:[a-z]+ )?(?:jobs|tokens|queues|groups|schedules|bytes|namespaces|minutes)\b")


def assert_singular_for_one(page: str) -> None:
    assert "(s)" not in page
    found = _ONE_PLURAL.search(html.unescape(re.sub(r"<[^>]+>", "", page)))
    assert found is None, found


async def test_counts_of_one_are_singular(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    await runtime.tokens.create("default", "ns", "the only token")
    await runtime.pushers.create("default", "ns", "hooks", Pusher(("other",), "http://127.0.0.1:9/hook", 1, 5))
    await engine.put_schedule("ns", Schedule("daily", "q", "0 0 * * *", None, "UTC", b"\x00", 0, 1, 0, "one"))
    job_id = (await engine.publish("ns", "q", NewJob(b"\x00"))).job_id
    await engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=1)
    await engine.bury("ns", "q", job_id, "boom")
    overview = (await admin.get("/ui")).text
    assert '<span class="n">1</span><span class="label">namespace</span>' in overview
    assert '<span class="n">1</span><span class="label">queue</span>' in overview
    assert "1 queue · 1 token<" in overview
    dead = (await admin.get("/ui/deadletter/ns/q")).text
    assert ">1 dead job<" in dead and "binary, 1 byte<" in dead
    for path in ("/ui", "/ui/queue/ns/q", "/ui/deadletter/ns/q", "/ui/tokens", "/ui/pushers", "/ui/cron"):
        assert_singular_for_one((await admin.get(path)).text)
    token = await csrf_token(admin)
    asked = await post(admin, "/ui/deadletter/ns/q/respawn", {"csrf": token})
    assert "Moves the 1 dead job of ns/q" in asked.text
    assert_singular_for_one(asked.text)
    done = await post(admin, "/ui/deadletter/ns/q/respawn", {"csrf": token, "confirm": "yes", "count": "1"})
    respawned = (await admin.get(done.headers["location"])).text
    assert "1 dead job respawned." in respawned
    asked = await post(admin, "/ui/queue/ns/q/destroy", {"csrf": token})
    assert "Deletes the 1 ready job of ns/q" in asked.text
    done = await post(admin, "/ui/queue/ns/q/destroy", {"csrf": token, "confirm": "yes"})
    assert "Queue destroyed: 1 ready job deleted." in (await admin.get(done.headers["location"])).text
    assert "Queue destroyed: 0 ready jobs deleted." in (await admin.get("/ui/queue/ns/q?done=destroyed&n=0")).text
    for odd in ("\u00b2", "9" * 5000, "-1", "x"):  # a link says what it likes: never a 500
        shown = await admin.get("/ui/queue/ns/q", params={"done": "destroyed", "n": odd})
        assert shown.status_code == 200 and "Queue destroyed: ? ready jobs deleted." in shown.text
    assert display.preview(b"\x00") == "binary, 1 byte: 00"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/ui/nothing"),
        ("GET", "/ui/"),
        ("GET", "/ui/queue/ns"),
        ("GET", "/ui/queue/ns/q/more/segments"),
        ("GET", "/ui/queue/ns/q/pause"),  # an action's path, not a page
        ("GET", "/ui/static/nothing.js"),
        ("POST", "/ui/nothing"),
        ("DELETE", "/ui/tokens"),
    ],
)
async def test_an_unknown_dashboard_path_is_the_dashboards_404_page(
    admin: httpx.AsyncClient, method: str, path: str
) -> None:
    answer = await admin.request(method, path)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert '<a href="/ui">« overview</a>' in answer.text
    assert re.search(r'id="error-message">No dashboard page here', answer.text)


@pytest.mark.parametrize("path", ["/nothing", "/uix", "/token", "/version/more"])
async def test_the_apis_unknown_paths_keep_their_json_404(admin: httpx.AsyncClient, path: str) -> None:
    answer = await admin.get(path)
    assert (answer.status_code, answer.json()) == (404, {"error": "api not found"})


CRUMB = "\u203a"  # the breadcrumb's separator


def crumbs(page: str) -> str:
    found = re.search(r'<nav class="crumbs" aria-label="breadcrumb">(.*?)</nav>', page, re.S)
    assert found is not None, page
    return found.group(1)


async def test_breadcrumbs_end_on_the_current_page_and_the_dead_letter_names_its_queue(
    admin: httpx.AsyncClient,
) -> None:
    queue = (await admin.get("/ui/queue/shop/orders")).text
    assert crumbs(queue).endswith(f' {CRUMB} <span aria-current="page">orders</span>')
    assert "<title>shop/orders · lmstfy-py</title>" in queue
    dead = (await admin.get("/ui/deadletter/shop/orders")).text
    trail = crumbs(dead)
    assert trail.endswith(f'>orders</a> {CRUMB} <span aria-current="page">dead letter</span>'), trail
    assert "<title>Dead letter of shop/orders · lmstfy-py</title>" in dead
    assert "<h1>Dead letter of <em>shop/orders</em></h1>" in dead


async def test_a_page_shows_its_processs_counts_before_they_are_written(redis_url: str) -> None:
    """No rate flush runs here: what the page shows of a publish is this process's own count."""
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            await runtime.pools.get("default").publish("ns", "q", NewJob(b"x"))
            assert "last 60 minutes: 1 published" in (await admin.get("/ui/queue/ns/q")).text
            assert 'data-queue="ns/q"' in (page := (await admin.get("/ui")).text)
            assert "last 60 minutes: 1 published" in page
            await runtime.rates.flush()
            assert "last 60 minutes: 1 published" in (await admin.get("/ui/queue/ns/q")).text  # once, written
    finally:
        await runtime.stop()


async def test_an_idle_process_writes_its_first_count_at_once(redis_url: str) -> None:
    """The other processes' pages see a publish after a quiet spell within IDLE_CHECK_S, not FLUSH_EVERY_S."""
    redis = Redis.from_url(redis_url)
    store, reader = RateStore(redis, RateCounter()), RateStore(redis, RateCounter())
    store.start()
    try:
        await asyncio.sleep(0.3)  # its first flush had nothing to write
        store.counter.published("default", "ns", "q", [NewJob(b"")], None)
        counted = time.monotonic()

        async def shown() -> bool:
            return sum((await reader.history("default")).of("ns", "q").published) == 1

        await wait_for(shown, timeout=1.0)
        assert time.monotonic() - counted < 1.0
    finally:
        await store.stop()
        await redis.aclose()


async def test_the_queue_page_tails_events_on_the_admin_twin_only_when_they_are_on(
    admin: httpx.AsyncClient, runtime: Runtime
) -> None:
    off = (await admin.get("/ui/queue/ns/q")).text
    assert 'id="event-tail"' not in off and "Events are off for this queue" in off
    await runtime.pools.get("default").set_queue_settings("ns", "q", SettingsChange(None, 500))
    on = (await admin.get("/ui/queue/ns/q")).text
    assert 'data-events-url="/queues/ns/q/events?pool=default"' in on and "keeps its last 500" in on


async def test_a_delayed_job_looked_up_is_promoted_from_the_page(admin: httpx.AsyncClient, runtime: Runtime) -> None:
    engine = runtime.pools.get("default")
    job_id = (await engine.publish("ns", "q", NewJob(b"due in ten minutes", delay_ms=600_000, group="g"))).job_id
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": job_id})).text
    assert "data-job-group>g<" in page and 'action="/ui/queue/ns/q/promote?pool=default"' in page
    assert 'data-due-label="1h"><b>1</b>' in page
    token = await csrf_token(admin)
    done = await post(admin, "/ui/queue/ns/q/promote", {"csrf": token, "job_id": job_id})
    assert done.headers["location"] == f"/ui/queue/ns/q?job_id={job_id}&pool=default&done=promoted"
    shown = (await admin.get(done.headers["location"])).text
    assert "data-job-state>ready<" in shown and "/promote?" not in shown  # no button on a ready job
    assert 'data-due-label="1h"><b>0</b>' in shown and "it is ready now" in shown
    # Ready in its group: counted, not in the next jobs' list, and not "No ready job".
    assert "data-next-unlisted>1 more ready job not listed: jobs of groups" in shown and "No ready job" not in shown
    again = await post(admin, "/ui/queue/ns/q/promote", {"csrf": token, "job_id": job_id})
    assert again.status_code == 409 and 'id="error-message">job is not delayed<' in again.text
    bad = await post(admin, "/ui/queue/ns/q/promote", {"csrf": token, "job_id": "bad id"})
    assert bad.status_code == 400 and 'id="error-message">invalid job id<' in bad.text


async def test_a_jobs_trace_context_is_shown_on_its_page_and_in_the_dead_letter(
    admin: httpx.AsyncClient, runtime: Runtime
) -> None:
    """SPEC 15: an operator finds the trace of a job (its trace id, to look it up in a tracing UI)."""
    engine = runtime.pools.get("default")
    trace = TraceContext(f"00-{'ab' * 16}-{'cd' * 8}-01", "vendor=x")
    traced = (await engine.publish("ns", "q", NewJob(b"t", trace=trace))).job_id
    plain = (await engine.publish("ns", "q", NewJob(b"p"))).job_id
    page = (await admin.get("/ui/queue/ns/q", params={"job_id": traced})).text
    assert f"data-job-trace><code>{'ab' * 16}</code>" in page and f"parent {'cd' * 8}, sampled" in page
    assert "tracestate <code>vendor=x</code>" in page
    assert "data-job-trace>\u2013<" in (await admin.get("/ui/queue/ns/q", params={"job_id": plain})).text
    for _ in range(2):
        await engine.consume("ns", ["q"], ttr_ms=60_000, timeout_ms=0, count=1)
    await engine.bury("ns", "q", traced, "boom")
    dead = (await admin.get("/ui/deadletter/ns/q")).text
    assert f"data-job-trace><code>{'ab' * 16}</code>" in dead
