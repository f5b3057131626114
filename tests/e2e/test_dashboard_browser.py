"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, against real
`lmstfy-py serve` processes. One browser for the module, a fresh context (cookies, cache) per test.

Every test also checks that the browser asked nothing of any host but the server's admin port
(no CDN, no font, no analytics): `context` records every request the pages made.
"""

from __future__ import annotations

import base64
import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from benchmarks.harness.lmstfy_servers import Server, create_token, wait_until
from lmstfy_py.web.dashboard.render import NOTICES, REFRESH_MS
from tests.fixtures.push_endpoints import Endpoints

CHROMIUM = "/usr/bin/chromium"
# A change shows within one refresh once the fetch after it is answered; a publish that lands
# just after a refresh's fetch waits for the next one: two intervals, plus the fetch on a busy machine.
SHOWN_WITHIN_MS = 2 * REFRESH_MS + 2000
ACCOUNTS_TOML = '[admin.accounts]\nalice = "wonder land"\n[admin.readonly_accounts]\nviewer = "look only"\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("dashboard"), args=["--workers", "1"]) as started:
        yield started.start()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=CHROMIUM)
    yield launched
    launched.close()


class Recorded:
    def __init__(self) -> None:
        self.urls: list[str] = []
        self.served_by_the_browser: set[str] = set()  # hosts a test answers with page.route: never on the network


@pytest.fixture
def requests_made() -> Recorded:
    return Recorded()


@pytest.fixture
def context(browser: Browser, server: Server, requests_made: Recorded) -> Iterator[BrowserContext]:
    made = browser.new_context(viewport={"width": 1280, "height": 800})
    made.set_default_timeout(15_000)
    made.on("request", lambda request: requests_made.urls.append(request.url))
    yield made
    made.close()
    hosts = {urlsplit(url).netloc for url in requests_made.urls}
    assert hosts <= {urlsplit(server.admin_url).netloc, *requests_made.served_by_the_browser}, requests_made.urls


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def publish(server: Server, token: str, ns: str, queue: str, body: bytes, **query: str | int) -> str:
    answer = httpx.put(
        f"{server.data_url}/api/{ns}/{queue}", params=query, headers={"X-Token": token}, content=body, timeout=10
    )
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["job_id"]
    return job_id


def consume(server: Server, token: str, ns: str, queue: str, **query: str | int) -> httpx.Response:
    query = {"timeout": 0, "ttr": 30, **query}
    return httpx.get(f"{server.data_url}/api/{ns}/{queue}", params=query, headers={"X-Token": token}, timeout=10)


def test_overview_lists_a_published_queue_and_its_count_changes_without_a_reload(server: Server, page: Page) -> None:
    token = create_token(server, "overview")
    publish(server, token, "overview", "orders", b"first")
    page.goto(f"{server.admin_url}/ui")
    ready = page.locator('tr[data-queue="overview/orders"] td[data-col="ready"]')
    expect(ready).to_have_text("1")
    page.evaluate("window.notReloaded = true")
    publish(server, token, "overview", "orders", b"second")
    publish(server, token, "overview", "mails", b"new queue")
    expect(ready).to_have_text("2", timeout=SHOWN_WITHIN_MS)
    expect(page.locator('tr[data-queue="overview/mails"] td[data-col="ready"]')).to_have_text(
        "1", timeout=SHOWN_WITHIN_MS
    )
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("#live")).to_contain_text("updated")


def test_respawn_a_dead_job_from_the_ui_then_consume_it(server: Server, page: Page) -> None:
    token = create_token(server, "rescue")
    job_id = publish(server, token, "rescue", "q", b"\x00\xffbinary", tries=1)
    assert consume(server, token, "rescue", "q").json()["job_id"] == job_id
    buried = httpx.put(
        f"{server.data_url}/api/rescue/q/job/{job_id}/bury", params={"reason": "disk full"}, headers={"X-Token": token}
    )
    assert buried.status_code == 200
    assert consume(server, token, "rescue", "q").status_code == 404  # dead: not delivered
    page.goto(f"{server.admin_url}/ui/deadletter/rescue/q")
    job = page.locator(f'article[data-job="{job_id}"]')
    expect(job).to_contain_text("disk full")
    expect(job).to_contain_text("00 ff 62 69 6e 61 72 79")  # binary data shown as hex
    job.get_by_role("button", name="Respawn").click()
    expect(page.locator(".notice")).to_have_text("1 dead job respawned.")
    expect(page.locator("[data-dead-size]")).to_have_attribute("data-dead-size", "0")
    delivered = consume(server, token, "rescue", "q")
    assert (delivered.status_code, delivered.json()["job_id"]) == (200, job_id)


def test_pause_from_the_ui_stops_consumes_until_resumed(server: Server, page: Page) -> None:
    token = create_token(server, "pausing")
    job_id = publish(server, token, "pausing", "q", b"wait")
    page.goto(f"{server.admin_url}/ui/queue/pausing/q")
    expect(page.locator(f'tr[data-next-job="{job_id}"]')).to_be_visible()
    page.get_by_role("button", name="Pause").click()
    expect(page.locator('[data-state="paused"]')).to_be_visible()
    # Still listed as next, marked paused: it is delivered first once resumed.
    expect(page.locator(f'tr[data-next-job="{job_id}"]')).to_be_visible()
    expect(page.locator("[data-next-paused]")).to_be_visible()
    answer = consume(server, token, "pausing", "q")
    assert (answer.status_code, answer.json()) == (404, {"msg": "no job available"})
    page.get_by_role("button", name="Resume").click()
    expect(page.locator('[data-state="active"]')).to_be_visible()
    assert consume(server, token, "pausing", "q").json()["job_id"] == job_id


def test_destroy_asks_for_a_confirmation_first(server: Server, page: Page) -> None:
    token = create_token(server, "destroying")
    publish(server, token, "destroying", "q", b"doomed")
    page.goto(f"{server.admin_url}/ui/queue/destroying/q")
    page.get_by_role("button", name="Destroy…").click()
    expect(page.locator("h1")).to_have_text("Destroy queue destroying/q?")
    assert httpx.get(f"{server.data_url}/api/destroying/q/size").json()["size"] == 1  # nothing done yet
    page.locator("#confirm").click()
    expect(page.locator(".notice")).to_have_text("Queue destroyed: 1 ready job deleted.")
    assert httpx.get(f"{server.data_url}/api/destroying/q/size").json()["size"] == 0


def test_a_token_created_in_the_ui_publishes(server: Server, page: Page) -> None:
    page.goto(f"{server.admin_url}/ui/tokens")
    page.fill("#namespace", "fromui")
    page.fill("#description", "made in the browser")
    page.get_by_role("button", name="Create").click()
    token = page.locator("#new-token").inner_text().strip()
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    publish(server, token, "fromui", "q", b"hello")
    page.goto(f"{server.admin_url}/ui/tokens")
    expect(page.locator('[data-namespace="fromui"]')).to_contain_text("made in the browser")


def test_a_push_group_made_in_the_ui_pushes_a_published_job_until_deleted(server: Server, page: Page) -> None:
    token = create_token(server, "pushing")
    with Endpoints.in_thread() as endpoint:
        page.goto(f"{server.admin_url}/ui/pushers")
        for field, value in {"namespace": "pushing", "group": "hooks", "queues": "events", "workers": "2"}.items():
            page.fill(f"#p-{field}", value)
        page.fill("#p-timeout", "5")
        page.fill("#p-endpoint", "ftp://127.0.0.1/nope")
        page.get_by_role("button", name="Create").click()
        # Refused with the admin API's text, the form kept as typed.
        expect(page.locator("#form-error")).to_have_text("the endpoint should be an http:// or https:// URL")
        expect(page.locator("#p-queues")).to_have_value("events")
        page.fill("#p-endpoint", endpoint.url("/ok"))
        page.get_by_role("button", name="Create").click()
        expect(page.locator(".notice")).to_have_text(NOTICES["pusher_created"])
        row = page.locator('tr[data-pusher="pushing/hooks"]')
        expect(row).to_contain_text(endpoint.url("/ok"))

        job_id = publish(server, token, "pushing", "events", b"pushed by the server")
        assert wait_until(lambda: job_id in endpoint.job_ids(), timeout=10), endpoint.job_ids()
        [delivered] = [got for got in endpoint.received if got.job["id"] == job_id]
        assert base64.b64decode(delivered.job["body"]) == b"pushed by the server"

        row.get_by_role("button", name="Delete…").click()
        expect(page.locator("h1")).to_have_text("Delete push group hooks of pushing?")
        page.locator("#confirm").click()
        expect(page.locator(".notice")).to_have_text(NOTICES["pusher_deleted"])
        expect(row).to_have_count(0)
        assert httpx.get(f"{server.admin_url}/pusher/pushing/hooks").status_code == 404
        kept = publish(server, token, "pushing", "events", b"for a consumer")
        assert consume(server, token, "pushing", "events", timeout=2).json()["job_id"] == kept  # no longer pushed
        assert endpoint.job_ids() == [job_id]


def test_a_schedule_made_in_the_ui_publishes_a_job_each_second_until_deleted(server: Server, page: Page) -> None:
    token = create_token(server, "ticking")
    page.goto(f"{server.admin_url}/ui/cron?ns=ticking")
    expect(page.locator("#c-namespace")).to_have_value("ticking")
    page.fill("#c-queue", "beats")
    page.fill("#c-name", "every-second")
    page.fill("#c-every", "1")
    page.fill("#c-data", '{"beat": true}')
    page.locator("#c-save").click()
    expect(page.locator(".notice")).to_have_text(NOTICES["schedule_created"])
    row = page.locator('tr[data-schedule="beats/every-second"]')
    expect(row).to_contain_text("every 1 s")

    answer = consume(server, token, "ticking", "beats", timeout=5)
    assert answer.status_code == 200, answer.text
    assert base64.b64decode(answer.json()["data"]) == b'{"beat": true}'
    # The page refreshes by itself to the schedule's last run, and links its job.
    expect(row.locator("[data-last-job]")).to_have_count(1, timeout=SHOWN_WITHIN_MS)

    row.get_by_role("button", name="Delete…").click()
    expect(page.locator("h1")).to_have_text("Delete the schedule every-second of ticking/beats?")
    page.locator("#confirm").click()
    expect(page.locator(".notice")).to_have_text(NOTICES["schedule_deleted"])
    expect(row).to_have_count(0)
    assert httpx.get(f"{server.admin_url}/cron/ticking").json() == {"schedules": []}


def test_a_job_looked_up_by_id_shows_its_state(server: Server, page: Page) -> None:
    token = create_token(server, "lookup")
    job_id = publish(server, token, "lookup", "q", "naïve text".encode(), delay=600)
    page.goto(f"{server.admin_url}/ui/queue/lookup/q")
    page.fill("#job_id", job_id)
    page.get_by_role("button", name="Look up").click()
    expect(page.locator("[data-job-state]")).to_have_text("delayed")
    expect(page.locator("#lookup pre.data")).to_have_text("naïve text")


def test_a_form_posted_from_another_site_is_refused(server: Server, page: Page, requests_made: Recorded) -> None:
    token = create_token(server, "forged")
    publish(server, token, "forged", "q", b"job")
    page.goto(f"{server.admin_url}/ui/queue/forged/q")  # the operator's browser has the dashboard's cookie
    token_field = page.locator('input[name="csrf"]').first.get_attribute("value")
    # A page of another origin (served by the browser itself: nothing leaves the machine) posting
    # the pause form, even with a token copied from a real page.
    evil = "http://evil.test/"
    requests_made.served_by_the_browser.add("evil.test")
    form = (
        f'<form method="post" action="{server.admin_url}/ui/queue/forged/q/pause">'
        f'<input name="csrf" value="{token_field}"><button id="go">go</button></form>'
    )
    page.route(evil, lambda route: route.fulfill(status=200, content_type="text/html", body=form))
    page.goto(evil)
    with page.expect_response(f"{server.admin_url}/ui/queue/forged/q/pause") as answered:
        page.click("#go")
    assert answered.value.status == 403
    expect(page.locator("#error-message")).to_contain_text("another site")
    stats = httpx.get(f"{server.data_url}/api/forged/q/stats", headers={"X-Token": token}).json()
    assert stats["paused"] is False


def test_basic_auth_challenge_when_accounts_are_configured(tmp_path: Path, browser: Browser) -> None:
    config = tmp_path / "lmstfy.toml"
    config.write_text(ACCOUNTS_TOML)
    with Server(tmp_path, config=config, args=["--workers", "1"]) as secured:
        secured.start()
        # Headless, no one answers the browser's prompt: the navigation may end in an auth error
        # after the 401 (Chromium does so without credentials), so the answer is read as it arrives.
        for credentials in (None, {"username": "alice", "password": "wrong"}):
            refused = browser.new_context(http_credentials=credentials)  # type: ignore[arg-type]
            try:
                page = refused.new_page()
                with page.expect_response(f"{secured.admin_url}/ui") as answered, contextlib.suppress(PlaywrightError):
                    page.goto(f"{secured.admin_url}/ui")
                assert answered.value.status == 401
                assert answered.value.headers["www-authenticate"] == 'Basic realm="lmstfy-py"'
            finally:
                refused.close()
        with logged_in(browser, "alice", "wonder land") as page:
            answer = page.goto(f"{secured.admin_url}/ui")
            assert answer is not None and answer.status == 200
            expect(page.locator("h1")).to_contain_text("Pool default")
            expect(page.locator("#live")).to_contain_text("updated", timeout=SHOWN_WITHIN_MS)  # refreshes authenticated
        # A read-only account (SPEC 15) sees the pages without a form, and its changes are refused.
        with logged_in(browser, "viewer", "look only") as page:
            answer = page.goto(f"{secured.admin_url}/ui/tokens")
            assert answer is not None and answer.status == 200
            expect(page.locator("#readonly")).to_have_text("read-only")
            expect(page.locator("form[method=post]")).to_have_count(0)
            posted = page.evaluate("fetch('/ui/tokens/create', {method: 'POST'}).then((answer) => answer.status)")
            assert posted == 403


@contextlib.contextmanager
def logged_in(browser: Browser, user: str, password: str) -> Iterator[Page]:
    """A page of a fresh context that answers the basic-auth challenge with this account."""
    made = browser.new_context(http_credentials={"username": user, "password": password})
    try:
        yield made.new_page()
    finally:
        made.close()


# What a chart's line goes through, sampled along its length by the browser: whatever the element
# (a polyline, a path of several pieces), only what is drawn, in the SVG's own units.
_DRAWN = """(line) => {
  const total = line.getTotalLength();
  const points = [];
  for (let i = 0; i <= 600; i++) {
    const point = line.getPointAtLength(total * i / 600);
    points.push([point.x, point.y]);
  }
  return points;
}"""


def assert_drawn_flat(points: list[list[float]]) -> None:
    """A line of one busy minute among idle ones: on the axis or at the minute's height, nothing
    between (a spike climbs through every height between); the busy minute a flat, visible dash."""
    low, high = max(y for _, y in points), min(y for _, y in points)
    assert low - high > 10, points  # the busy minute is drawn above the axis
    between = [(x, y) for x, y in points if high + 0.5 < y < low - 0.5]
    assert between == [], between
    top = [x for x, y in points if y <= high + 0.5]
    assert max(top) - min(top) >= 1.5, top  # a short flat line, not a lone point


def test_a_lone_busy_minute_is_drawn_as_a_flat_dash_not_a_spike(server: Server, page: Page) -> None:
    token = create_token(server, "lone")
    publish(server, token, "lone", "q", b"the only job")
    page.goto(f"{server.admin_url}/ui/queue/lone/q")
    expect(page.locator("#queue-rates figcaption")).to_contain_text(
        "last 60 minutes: 1 published", timeout=SHOWN_WITHIN_MS
    )
    assert_drawn_flat(page.locator("#queue-rates svg .pub").evaluate(_DRAWN))
    page.goto(f"{server.admin_url}/ui?ns=lone")
    assert_drawn_flat(page.locator('tr[data-queue="lone/q"] svg.spark .pub').evaluate(_DRAWN))


def rates_text(server: Server, ns: str, queue: str) -> str:
    found = re.search(r'last 60 minutes: [^<"]*', httpx.get(f"{server.admin_url}/ui/queue/{ns}/{queue}").text)
    assert found is not None
    return found.group(0)


def test_a_publish_shows_in_the_rates_at_once(server: Server, page: Page) -> None:
    """The server has one worker: the process that counted a publish renders the page."""
    token = create_token(server, "rating")
    publish(server, token, "rating", "q", b"first")
    assert wait_until(lambda: "1 published" in rates_text(server, "rating", "q"), timeout=5)
    # Just after the counts were written: the next write is up to 2 s away, the page is not.
    publish(server, token, "rating", "q", b"second")
    assert rates_text(server, "rating", "q").startswith("last 60 minutes: 2 published")
    page.goto(f"{server.admin_url}/ui/queue/rating/q")
    time.sleep(0.2)
    publish(server, token, "rating", "q", b"third")
    expect(page.locator("#queue-rates figcaption")).to_contain_text(
        "last 60 minutes: 3 published", timeout=REFRESH_MS + 1000
    )  # the next refresh


def test_the_queue_page_tails_its_events_live(server: Server, page: Page) -> None:
    token = create_token(server, "tail")
    switched = httpx.put(f"{server.data_url}/api/tail/q/settings", params={"events": 100}, headers={"X-Token": token})
    assert switched.status_code == 200, switched.text
    page.goto(f"{server.admin_url}/ui/queue/tail/q")
    expect(page.locator("[data-tail-state]")).to_have_text("live")
    page.evaluate("window.notReloaded = true")
    job_id = publish(server, token, "tail", "q", b"job", priority=7)
    shown = page.locator('#event-tail li[data-event="published"]')
    expect(shown).to_contain_text(job_id)
    expect(shown).to_contain_text("priority 7")
    assert page.evaluate("window.notReloaded") is True


def test_the_queue_page_shows_its_limits_groups_in_flight_and_due_jobs_and_promotes_one(
    server: Server, page: Page
) -> None:
    token = create_token(server, "flow")
    limits = {"max_reserved": 5, "rate": 2.5, "group_concurrency": 2}
    answer = httpx.put(f"{server.data_url}/api/flow/q/settings", params=limits, headers={"X-Token": token})
    assert answer.status_code == 200, answer.text
    for group in ("a", "a", "b", "c"):
        publish(server, token, "flow", "q", b"grouped", group=group)
    assert len(consume(server, token, "flow", "q", count=2).json()) == 2  # groups a and b, fairly
    soon = publish(server, token, "flow", "q", b"soon", delay=30)
    for delay in (600, 7200, 7200, 3 * 86400):
        publish(server, token, "flow", "q", b"delayed", delay=delay, ttl=0)
    page.goto(f"{server.admin_url}/ui/queue/flow/q")
    shown = {key: page.locator(f'[data-limit="{key}"]') for key in limits | {"burst": 0}}
    expect(shown["max_reserved"]).to_have_text("5")
    expect(shown["rate"]).to_have_text("2.5/s")
    expect(shown["burst"]).to_have_text("3 (default)")
    expect(shown["group_concurrency"]).to_have_text("2 reserved at once")
    expect(page.locator("[data-groups-in-flight]")).to_have_text("2")
    expect(page.locator("[data-oldest-ready]")).to_have_text(re.compile(r"\d+ s"))  # groups a and c wait
    due = {key: page.locator(f'[data-due-label="{key}"] b') for key in ("1m", "1h", "1d", "1d+")}
    assert [due[key].inner_text() for key in due] == ["1", "1", "2", "1"]
    bars = page.locator("#due-chart rect.bar")
    heights = [float(bars.nth(i).get_attribute("height") or 0) for i in range(4)]
    assert heights[2] > heights[0] == heights[1] == heights[3] > 0  # drawn to scale

    page.fill("#job_id", soon)
    page.get_by_role("button", name="Look up").click()
    expect(page.locator("[data-job-state]")).to_have_text("delayed")
    page.get_by_role("button", name="Promote").click()
    expect(page.locator(".notice")).to_have_text(NOTICES["promoted"])
    expect(page.locator("[data-job-state]")).to_have_text("ready")
    expect(page.locator('[data-due-label="1m"] b')).to_have_text("0")
