#!/usr/bin/env python3
"""Screenshots of every dashboard page, for docs/DASHBOARD.md: 1280x800 and a phone's 390x844.

    .venv/bin/python -m scripts.dashboard_screenshots --out docs/dashboard

Starts its own `lmstfy-py serve` (embedded Redis in a temporary directory), fills it over the
HTTP APIs with a small demo (two namespaces, a delayed queue, reserved jobs, an urgent job, a
binary job buried with a reason, a paused queue, a token with a limit and a scoped one, push
groups, recurring jobs, a queue's flow-control limits with grouped and delayed jobs, traced
jobs), then opens each page in Debian's headless Chromium (/usr/bin/chromium, driven by
Playwright) and saves
`<page>-wide.png` and `<page>-phone.png` (the whole page, below the fold too).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from benchmarks.harness.lmstfy_servers import Server, create_token

CHROMIUM = "/usr/bin/chromium"
SIZES = {"wide": (1280, 800), "phone": (390, 844)}
RATE_FLUSH_S = 2.5  # the server writes its rate counts every 2 s
ORDER_LIMITS = {"max_reserved": 20, "rate": 50, "group_concurrency": 3}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def seed(server: Server) -> dict[str, str]:
    """The demo state; the pages to shoot, by name."""
    demo, shop = create_token(server, "demo", "billing workers"), create_token(server, "shop", "checkout")
    with httpx.Client(base_url=server.data_url, timeout=10) as data, httpx.Client(base_url=server.admin_url) as admin:
        # Flow control (SPEC 14): limits, orders grouped by customer, a few due later.
        checked(admin.put("/queues/demo/orders/settings", params=ORDER_LIMITS))
        for i in range(40):
            data.put(
                "/api/demo/orders",
                params={"tries": 3, "group": f"customer-{i % 6}"},
                headers={"X-Token": demo},
                content=f'{{"order": {i}, "action": "close"}}',
            )
        for delay in (45, 900, 900, 1800, 5400, 172800):
            data.put("/api/demo/orders", params={"delay": delay, "ttl": 0}, headers={"X-Token": demo}, content="later")
        for i in range(12):
            data.put("/api/demo/emails", params={"delay": 600}, headers={"X-Token": demo}, content=f"mail {i}")
        for _ in range(15):
            data.get("/api/demo/orders", params={"ttr": 60}, headers={"X-Token": demo})
        traced = {"X-Token": demo, "traceparent": TRACEPARENT, "tracestate": "shop=checkout"}
        data.put("/api/demo/thumbnails", params={"tries": 1}, headers=traced, content=b"\x89PNG\r\n\x1a\n\x00")
        job = data.get("/api/demo/thumbnails", params={"ttr": 60}, headers={"X-Token": demo}).json()["job_id"]
        reason = {"reason": "convert: unsupported image format"}
        data.put(f"/api/demo/thumbnails/job/{job}/bury", params=reason, headers={"X-Token": demo})
        for i in range(5):
            data.put("/api/shop/carts", headers={"X-Token": shop}, content=f"cart {i}")
        admin.put("/queues/shop/carts/pause")
        admin.put(f"/token/demo/{demo}/limit", json={"read": 100, "write": 50, "interval": 10})
        urgent = {"priority": 9}
        data.put("/api/demo/orders", params=urgent, headers={"X-Token": demo}, content='{"refund": 7, "urgent": true}')
        # The queue page looks up a job with a trace context (SPEC 15), next to go by its priority.
        published = data.put("/api/demo/orders", params={"priority": 10}, headers=traced, content='{"order": 99}')
        looked_up = checked(published).json()["job_id"]
        scoped = {"description": "order intake", "scope": "publish", "queues": "orders,orders-*"}
        checked(admin.post("/token/demo", params=scoped))
        push_groups(admin)
        schedules(data, demo, shop)
    return {
        "overview": "/ui",
        "queue": f"/ui/queue/demo/orders?job_id={looked_up}",
        "deadletter": "/ui/deadletter/demo/thumbnails",
        "pushers": "/ui/pushers",
        "cron": "/ui/cron?ns=demo",
        "tokens": "/ui/tokens",
    }


def checked(answer: httpx.Response) -> httpx.Response:
    answer.raise_for_status()
    return answer


def push_groups(admin: httpx.Client) -> None:
    """Groups on queues nothing else uses (their endpoints answer nothing here: the jobs would loop)."""
    billing = {"queues": ["invoices", "receipts"], "endpoint": "https://billing.internal/hooks/lmstfy"}
    billing |= {"workers": 8, "timeout": 30, "backoff": "exponential", "backoff_ms": 2000, "max_attempts": 10}
    checked(admin.post("/pusher/demo/billing", json={**billing, "secret": "demo-secret-never-shown"}))
    search = {"queues": ["reindex"], "endpoint": "http://search.internal:8080/reindex", "workers": 2, "timeout": 120}
    checked(admin.post("/pusher/demo/search", json=search))
    stock = {"queues": ["stock"], "endpoint": "http://stock.internal/", "workers": 1, "timeout": 5}
    checked(admin.post("/pusher/shop/stock", json=stock))


def schedules(data: httpx.Client, demo: str, shop: str) -> None:
    """Recurring jobs; the heartbeat runs every second, so the page shows a last run."""

    def put(token: str, path: str, body: str, **query: str | int) -> None:
        checked(data.put(f"/api/{path}", params=query, headers={"X-Token": token}, content=body))

    put(
        demo, "demo/reports/cron/daily-sales", '{"report": "sales"}', cron="30 6 * * 1-5", tz="Europe/Paris", priority=5
    )
    put(demo, "demo/emails/cron/digest", "digest", cron="@hourly")
    put(demo, "demo/cleanup/cron/sweep", "sweep", every=300, catchup="none", ttl=600)
    put(demo, "demo/heartbeat/cron/ping", "ping", every=1)
    put(shop, "shop/carts/cron/abandoned", "remind", cron="0 */4 * * *")


def shoot(server: Server, pages: dict[str, str], out: Path) -> list[Path]:
    made = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            for size, (width, height) in SIZES.items():
                context = browser.new_context(viewport={"width": width, "height": height})
                page = context.new_page()
                for name, path in pages.items():
                    page.goto(server.admin_url + path)
                    made.append(out / f"{name}-{size}.png")
                    page.screenshot(path=str(made[-1]), full_page=True)
                context.close()
        finally:
            browser.close()
    return made


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the PNG files")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir, Server(Path(workdir), args=["--workers", "1"]) as server:
        server.start()
        pages = seed(server)
        time.sleep(RATE_FLUSH_S)  # the charts show the demo's traffic once flushed
        for path in shoot(server, pages, args.out):
            print(path)
        server.stop()


if __name__ == "__main__":
    main()
