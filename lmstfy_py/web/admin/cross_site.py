"""Refuses a request that changes something on the admin port when a browser sent it from another
site (cross-site request forgery).

The admin API takes its parameters from the query string and form bodies, as lmstfy's does, so a
page on any site could make a visitor's browser POST to it: to `127.0.0.1:7778` with no account
configured (lmstfy's default), or with the basic-auth credentials the browser keeps for the
dashboard. Such a request could create a push group that delivers a queue's jobs to the page's
own server. Browsers say where a request comes from (`Sec-Fetch-Site`, `Origin`); programs (curl,
token-cli, lmstfy's clients) send neither and are not affected. Reads (GET, HEAD) are left alone:
a page cannot read their answers without CORS, which the admin port never grants. The
dashboard's forms (/ui) check the same and a signed token besides, and answer in HTML
(web/dashboard/csrf.py).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from lmstfy_py.errors import CrossSiteRefused

READS = frozenset({"GET", "HEAD", "OPTIONS"})
DASHBOARD = "/ui"
SAME_SITE = frozenset({"same-origin", "none"})  # "none": typed or bookmarked by the user


def cross_site(scope: Scope) -> bool:
    """Whether the browser that sent the request says it came from another origin."""
    headers = Headers(scope=scope)
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in SAME_SITE:
        return True
    origin = headers.get("origin")
    return origin is not None and origin != f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"


class CrossSiteMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] not in READS
            and not scope["path"].startswith(DASHBOARD)
            and cross_site(scope)
        ):
            raise CrossSiteRefused("refused: a request from another site")
        await self.app(scope, receive, send)
