"""What every dashboard page shares: templates, the page frame, forms, notices, errors as pages.

Pages are rendered on the server from Jinja2 templates (autoescaped) and work without
JavaScript; static/dashboard.js only refreshes the parts marked `data-refresh`. Every response
carries a Content-Security-Policy that allows scripts, styles and images from this server
alone, so nothing can be loaded from elsewhere (and an injected script would not run), and
refuses framing (clickjacking). An error inside a dashboard route becomes an HTML page with the
error's status, not the API's JSON.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from lmstfy_py import ids
from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.push import shown
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.dashboard import csrf, display
from lmstfy_py.web.errors import as_lmstfy_error
from lmstfy_py.web.middleware import route

REFRESH_MS = 3000  # how often a page refreshes its data-refresh parts
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # pages show tokens and job data
}

TEMPLATES = Environment(
    loader=PackageLoader("lmstfy_py.web.dashboard", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters.update(
    count=display.count,
    plural=display.plural,  # {{ n|plural("dead job") }}: "1 dead job", "2 dead jobs"
    noun=display.noun,  # {{ n|noun("queue") }}: the word alone, for a count shown apart
    when=display.when,
    ago=display.ago,
    age=display.age,  # {{ oldest_ready_ms|age }}: "3 m 12 s"
    short_token=display.short_token,
    preview=display.preview,
    urlquery=urlencode,
    reason=shown.reason,  # a push failure's endpoint without credentials, as the API shows it
)


@dataclass(frozen=True, slots=True)
class NavItem:
    """A top-level page in the navigation bar."""

    title: str
    path: str


class Dashboard:
    """The dashboard's state on the admin app: its pages' navigation and the CSRF signer."""

    def __init__(self, runtime: Runtime, nav: list[NavItem]) -> None:
        self.runtime = runtime
        self.nav = nav
        self.csrf = csrf.Csrf(runtime.pools.own(runtime.config.admin_pool).redis)


def dashboard_of(request: Request) -> Dashboard:
    return cast(Dashboard, request.app.state.dashboard)


def runtime_of(request: Request) -> Runtime:
    return dashboard_of(request).runtime


def pool_of(request: Request) -> str:
    pool = request.query_params.get("pool") or DEFAULT_POOL
    if pool not in runtime_of(request).pools:
        raise InvalidParameter("pool not found")
    return pool


def store_of(request: Request) -> JobStore:
    return runtime_of(request).pools.get(pool_of(request))


def queue_of(request: Request) -> tuple[str, str]:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return ns, queue


def job_id_of(raw: str) -> str:
    """A job id from a link or a form, refused as the API refuses one."""
    if not ids.is_acceptable(raw):
        raise InvalidParameter("invalid job id")
    return raw


async def page(request: Request, template: str, context: Mapping[str, Any], status: int = 200) -> Response:
    """The page rendered in the dashboard's frame, with a CSRF token for its forms."""
    board = dashboard_of(request)
    nonce = csrf.nonce_of(request)
    fresh = nonce is None
    nonce = nonce or csrf.new_nonce()
    pool = request.query_params.get("pool") or DEFAULT_POOL
    frame = {
        "nav": board.nav,
        "path": request.url.path,
        "pools": board.runtime.pools.names(),
        "pool": pool if pool in board.runtime.pools else DEFAULT_POOL,
        "csrf_field": csrf.FIELD,
        "csrf_token": await board.csrf.token(nonce),
        "refresh_ms": REFRESH_MS,
        "notice": notice_of(request),
        # A read-only account's pages have no form that changes anything (its POST would be refused).
        "readonly": readonly.is_readonly(request.scope),
    }
    html = TEMPLATES.get_template(template).render({**frame, **context})
    response = HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
    if fresh:
        csrf.set_nonce(response, nonce)
    return response


def error_page(message: str, status: int) -> Response:
    """An error as a page; no CSRF token needed, no store touched (it may be what failed)."""
    html = TEMPLATES.get_template("error.html").render(
        {"nav": [], "pools": [], "pool": DEFAULT_POOL, "message": message, "status": status, "refresh_ms": 0}
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


async def not_found(request: Request) -> Response:
    """Any path under /ui that no page has, whatever the method: the dashboard's own 404 page (a
    person followed a link or typed it), where the API's routes answer their JSON 404."""
    return error_page("No dashboard page here: it may have moved, or the link is mistyped.", 404)


Endpoint = Callable[[Request], Awaitable[Response]]


def page_routes(path: str, show: Endpoint, actions: Mapping[str, Endpoint]) -> list[Route]:
    """A page's routes: GET `path` shows it; POST `path`/ACTION does what the form of ACTION asks."""
    shown = route(path, "GET", ui(show))
    return [shown, *(route(f"{path}/{action}", "POST", ui(handler)) for action, handler in actions.items())]


def ui(endpoint: Endpoint) -> Endpoint:
    """A dashboard route: any error it meets becomes an error page with the API's status and text."""

    @functools.wraps(endpoint)
    async def handle(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            error = as_lmstfy_error(exc)  # logs what is a bug, maps Redis outages to 503
            return error_page(error.message, error.status)

    return handle


async def form_of(request: Request) -> dict[str, str]:
    """A dashboard form's fields, once its CSRF token and origin are checked. Fields come from the
    url-encoded body only: a link (a GET, or a query string) never carries an action."""
    body = await params.read_body(request)
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise InvalidParameter("expected a form")
    fields: dict[str, str] = {}
    for key, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        fields.setdefault(key, value)
    await dashboard_of(request).csrf.check(request, fields.get(csrf.FIELD, ""))
    return fields


async def posted(request: Request) -> tuple[Runtime, str, dict[str, str]]:
    """What a form's handler acts with: the runtime, the pool and the form's fields."""
    return runtime_of(request), pool_of(request), await form_of(request)


# -- notices: what an action did, shown on the page it leads back to ----------------------

NOTICES = {
    "paused": "Queue paused: nothing is delivered from it until it is resumed.",
    "resumed": "Queue resumed.",
    "destroyed": "Queue destroyed: {n} ready {jobs} deleted.",
    "promoted": "Job promoted: it is ready now, as if it had come due.",
    "respawned": "{n} dead {jobs} respawned.",
    "deleted": "{n} dead {jobs} deleted.",
    "token_deleted": "Token deleted, with its limit.",
    "limit_set": "Limit saved.",
    "limit_deleted": "Limit deleted.",
    "pusher_created": "Push group created: its queues are pushed to its endpoint from now on.",
    "pusher_saved": "Push group saved: every server process uses it within a second.",
    "pusher_deleted": "Push group deleted: its queues are no longer pushed.",
    "schedule_created": "Schedule created.",
    "schedule_replaced": "Schedule replaced: its next run is counted from now.",
    "schedule_deleted": "Schedule deleted: it publishes no more jobs.",
}


def notice_of(request: Request) -> str | None:
    """The fixed text of a `?done=` code: a link cannot make the page say anything else."""
    text = NOTICES.get(request.query_params.get("done", ""))
    if text is None:
        return None
    n = request.query_params.get("n", "")
    # ASCII digits only, and short: int() refuses "²" and numbers of thousands of digits.
    if not (n.isascii() and n.isdigit() and len(n) <= 18):
        return text.format(n="?", jobs="jobs")
    return text.format(n=display.count(int(n)), jobs=display.noun(int(n), "job"))


def back_to(path: str, pool: str, done: str, n: int | None = None, **query: str) -> Response:
    """303 to the page an action was made from (post/redirect/get: a reload does not repeat it)."""
    wanted = {**query, "pool": pool, "done": done}
    if n is not None:
        wanted["n"] = str(n)
    return RedirectResponse(f"{path}?{urlencode(wanted)}", status_code=303, headers=SECURITY_HEADERS)


async def confirm(request: Request, what: str, details: str, fields: Mapping[str, str]) -> Response:
    """The confirmation step of a destructive action: the same form again, with confirm=yes."""
    action = request.url.path
    # Every action's path is the page it was made from plus one segment: Cancel leads back there.
    context: dict[str, Any] = {"what": what, "details": details, "fields": fields, "action": action}
    context.update(back=action.rsplit("/", 1)[0], no_refresh=True)
    return await page(request, "confirm.html", context)


def confirmed(fields: Mapping[str, str]) -> bool:
    return fields.get("confirm") == "yes"
