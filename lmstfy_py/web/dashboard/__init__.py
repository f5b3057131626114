"""The web dashboard on the admin port (SPEC section 11): GET /ui and the pages below it.

Server-rendered: Starlette routes render Jinja2 templates (templates/), the stylesheet and one
small script ship in the package (static/), charts are SVG drawn on the server (charts.py).
Every page reads and changes through the same stores as the admin API (JobStore, TokenStore,
LimitStore, PusherStore, RateStore), never Redis directly. The admin app's basic auth covers every route
here; forms are protected against CSRF (csrf.py).

A page is one module exporting ROUTES (and NAV, for a page in the navigation bar) plus its
template extending base.html; it is listed in PAGES below.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from lmstfy_py.runtime import Runtime
from lmstfy_py.web.dashboard import cron, deadletter, overview, pushers, queue, render, static, tokens
from lmstfy_py.web.middleware import route

PAGES = [overview, queue, deadletter, pushers, cron, tokens]
NAV = [overview.NAV, pushers.NAV, cron.NAV, tokens.NAV]
# Last: what no page took under /ui/ is the dashboard's HTML 404, not the API's JSON one. Every
# method, as the API answers a wrong method with its 404 too (web/errors.py).
NOT_FOUND = [
    route("/ui/{path:path}", method, render.not_found)
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
]
ROUTES: list[BaseRoute] = [found for module in [*PAGES, static] for found in module.ROUTES] + NOT_FOUND
render.TEMPLATES.globals["static_url"] = static.url


def dashboard(runtime: Runtime) -> render.Dashboard:
    """What the admin app keeps on app.state.dashboard."""
    return render.Dashboard(runtime, NAV)


__all__ = ["ROUTES", "dashboard"]
