"""Read-only admin accounts (SPEC 15): every admin route, /metrics and /ui read; every change refused
with 403 and nothing changed; no token ever shown, only `sha256:` and a short hash; the dashboard
without a form that changes anything. In-process, on the standalone Redis."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from lmstfy_py import server
from lmstfy_py.admin import grants
from lmstfy_py.admin.limits import Limit
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app
from tests.web import test_auth
from tests.web.test_auth import ACCOUNTS, ANSWERS, CHALLENGE, TOKEN, _listeners, answered, basic, expected, seed

VIEWER_PASSWORD = "look but do not touch"
VIEWER = basic("viewer", VIEWER_PASSWORD)
FULL = basic("alice", ACCOUNTS["alice"])
READ_ONLY = (403, {"error": "read-only account"})
# What a read-only account reads in a token's place: the first 12 hex digits of its SHA-256.
SHOWN = "sha256:" + hashlib.sha256(TOKEN.encode()).hexdigest()[:12]
MASKED = {"/token/ns": (200, {"tokens": {SHOWN: "seeded"}})}
MASKED["/limits"] = (200, [{"namespace": "ns", "token": SHOWN, "limiter": {"read": 1, "write": 2, "interval": 3}}])
CHANGES = [(method, path) for method, path, _ in ANSWERS if method not in ("GET", "HEAD")] + [
    ("PUT", "/queues/ns/q/pause"),
    ("DELETE", "/queues/ns/q/pause"),
    ("PUT", "/queues/ns/q/settings?priority=on"),
    ("PUT", f"/token/ns/{TOKEN}/limit"),
    ("DELETE", f"/token/ns/{TOKEN}/limit"),
    ("POST", "/pusher/ns/g"),
    ("DELETE", "/cron/ns/q/daily"),
    ("PATCH", "/token/ns"),
    ("DELETE", "/nowhere"),  # refused before any route is looked for
]
# What a full account reads to tell that nothing changed.
STATE = ["/token/ns", "/limits", "/namespaces", "/deadletter/ns/q", "/accesslog", "/pushers", "/queues/ns/q/settings"]
PAGES = ["/ui", "/ui/queue/ns/q", "/ui/deadletter/ns/q", "/ui/pushers", "/ui/cron", "/ui/tokens"]
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@pytest.fixture
async def secured(redis_url: str) -> AsyncIterator[Runtime]:
    pools = {name: PoolConfig(name, url=redis_url) for name in ("default", "other")}
    readonly = {"viewer": VIEWER_PASSWORD}
    runtime = await Runtime.start(Config(pools=pools, accounts=ACCOUNTS, readonly_accounts=readonly), run_pumps=False)
    try:
        yield runtime
    finally:
        await runtime.stop()


admin = test_auth.admin  # the admin app on this module's `secured` runtime


async def state(admin: httpx.AsyncClient) -> list[tuple[int, object]]:
    return [answered(await admin.get(path, headers=FULL)) for path in STATE]


async def test_a_read_only_account_reads_every_admin_route_with_tokens_hashed(
    secured: Runtime, admin: httpx.AsyncClient
) -> None:
    dead = await seed(secured)
    for method, path, answer in ANSWERS:
        if method == "GET":
            wanted = MASKED.get(path, answer)
            assert answered(await admin.get(path, headers=VIEWER)) == expected(wanted, dead), path
    assert (await admin.get("/metrics", headers=VIEWER)).status_code == 200
    for path in PAGES:
        assert (await admin.get(path, headers=VIEWER)).status_code == 200, path
    # A full account still sees the tokens themselves.
    assert (await admin.get("/token/ns", headers=FULL)).json() == {"tokens": {TOKEN: "seeded"}}


async def test_every_change_of_a_read_only_account_is_refused_and_changes_nothing(
    secured: Runtime, admin: httpx.AsyncClient
) -> None:
    await seed(secured)
    before = await state(admin)
    for method, path in CHANGES:
        response = await admin.request(method, path, headers=VIEWER)
        assert answered(response) == READ_ONLY, (method, path)
        assert response.headers["x-request-id"]
    assert await state(admin) == before
    # The same from a full account is not refused (it changes things: last).
    assert (await admin.put("/queues/ns/q/pause", headers=FULL)).status_code == 200


async def test_a_read_only_accounts_form_is_refused_with_a_page(secured: Runtime, admin: httpx.AsyncClient) -> None:
    await seed(secured)
    page = await admin.get("/ui/queue/ns/q", headers=FULL)  # a full account's form, token and cookie
    found = _CSRF.search(page.text)
    assert found is not None
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for path in ("/ui/queue/ns/q/pause", "/ui/tokens/create", "/ui/nowhere"):
        refused = await admin.post(path, data={"csrf": found.group(1)}, headers={**form, **VIEWER})
        assert refused.status_code == 403, path
        assert refused.headers["content-type"].startswith("text/html")
        assert "read-only" in refused.text
    assert not (await secured.pools.get("default").stats("ns", "q")).paused


@pytest.mark.parametrize(
    "headers", [basic("viewer", "wrong"), basic("viewer", ""), basic("alice", VIEWER_PASSWORD), {}]
)
async def test_a_wrong_password_is_still_refused(admin: httpx.AsyncClient, headers: dict[str, str]) -> None:
    response = await admin.get("/token/ns", headers=headers)
    assert (response.status_code, response.headers["www-authenticate"]) == (401, CHALLENGE)


async def test_wrong_passwords_of_a_read_only_account_are_counted(secured: Runtime) -> None:
    # From an address of its own: failures are counted per address, in Redis.
    transport = httpx.ASGITransport(app=create_admin_app(secured), client=("192.0.2.7", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as admin:
        for _ in range(30):
            response = await admin.get("/ui", headers=basic("viewer", "guess"))
            if response.status_code == 429:
                break
        assert response.status_code == 429 and int(response.headers["retry-after"]) > 0
        # Right credentials from that address wait as well.
        assert (await admin.get("/ui", headers=VIEWER)).status_code == 429


async def test_no_page_shows_a_token_or_a_form_to_a_read_only_account(
    secured: Runtime, admin: httpx.AsyncClient
) -> None:
    await seed(secured)
    for path in PAGES:
        full = (await admin.get(path, headers=FULL)).text
        viewer = (await admin.get(path, headers=VIEWER)).text
        assert TOKEN not in viewer and 'method="post"' not in viewer and 'name="csrf"' not in viewer, path
        assert 'id="readonly"' in viewer and 'id="readonly"' not in full, path
        if path != "/ui":  # the overview has no form
            assert 'method="post"' in full, path
    tokens = (await admin.get("/ui/tokens", headers=VIEWER)).text
    assert f'<code class="masked-token">{SHOWN}</code>' in tokens and "1, 2 per 3 s" in tokens
    assert TOKEN in (await admin.get("/ui/tokens", headers=FULL)).text


async def test_a_token_of_another_pool_keeps_its_prefix(secured: Runtime, admin: httpx.AsyncClient) -> None:
    await secured.limits.create("other", "ns", TOKEN, Limit(read=1, write=2, interval=3))
    limits = (await admin.get("/limits", headers=VIEWER)).json()
    assert [entry["token"] for entry in limits] == [f"other:{SHOWN}"]


def test_read_only_accounts_alone_turn_basic_auth_on() -> None:
    """No exposure warning: with read-only accounts only, nobody can create a token on the admin port."""
    listeners = _listeners("0.0.0.0")
    try:
        assert server.exposure_warning(Config(readonly_accounts={"viewer": "x"}), listeners) is None
        assert server.exposure_warning(Config(), listeners) is not None
    finally:
        listeners.close()


async def test_a_read_only_account_sees_scoped_tokens_hashed_with_their_scopes(
    secured: Runtime, admin: httpx.AsyncClient
) -> None:
    await secured.tokens.create("default", "ns", "workers", TOKEN, grants.parse("consume", "orders-*"))
    scoped = {"scope": ["consume"], "queues": ["orders-*"]}
    listed = (await admin.get("/token/ns", headers=VIEWER)).json()
    assert listed == {"tokens": {SHOWN: "workers"}, "scopes": {SHOWN: scoped}}
    page = (await admin.get("/ui/tokens", headers=VIEWER)).text
    assert TOKEN not in page and '<td class="token-scope">consume</td>' in page


async def test_a_read_only_account_sees_push_endpoints_without_their_credentials(
    secured: Runtime, admin: httpx.AsyncClient
) -> None:
    endpoint = "http://hook-user:hunter22@hooks.example:8080/jobs?apikey=k3y-k3y"
    body = {"queues": ["q"], "endpoint": endpoint, "workers": 1, "timeout": 5}
    assert (await admin.post("/pusher/ns/g", json=body, headers=FULL)).status_code == 201
    shown = "http://***@hooks.example:8080/jobs?***"
    assert (await admin.get("/pusher/ns/g", headers=VIEWER)).json()["pusher"]["endpoint"] == shown
    assert (await admin.get("/pusher/ns", headers=VIEWER)).json()["pushers"]["g"]["endpoint"] == shown
    for page in ("/ui/pushers", "/ui/pushers?ns=ns&group=g"):
        text = (await admin.get(page, headers=VIEWER)).text
        assert "hooks.example" in text and "hunter22" not in text and "k3y-k3y" not in text, page
    # A full account edits the group: it sees the endpoint as entered.
    assert (await admin.get("/pusher/ns/g", headers=FULL)).json()["pusher"]["endpoint"] == endpoint
    assert "hunter22" in (await admin.get("/ui/pushers?ns=ns&group=g", headers=FULL)).text
