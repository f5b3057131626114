"""Prometheus over HTTP: GET /metrics on the admin app, and the request instrumentation of both apps.

Requests are labelled by the matched route's path template ("/api/{ns}/{queue}"), never by the
raw path, and by a known method or "other"; a namespace only once the request was authenticated:
so the number of series stays bounded whatever anonymous clients send (metrics/recording.py
also caps each family). Each app says which one
it is in `app.state.name` ("data" or "admin").
"""

from __future__ import annotations

import asyncio
import functools
import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from lmstfy_py import metrics
from lmstfy_py.web import params

UNMATCHED = "unmatched"  # the route label of a request no route took
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
# Set in request.state by the data app once a request proved it may name its namespace (a valid
# token, or a public route of a queue that exists): only then is the namespace a label, so that
# anonymous requests with made-up names add no series.
LABELLED_NAMESPACE = "labelled_namespace"
# lmstfy's api label is gin's route path, which spells the parameters differently.
_GIN_PARAMS = {"ns": "namespace"}
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


async def scrape(request: Request) -> Response:
    metrics.flush()  # this process's counts, exact; the other workers' as of their last flush
    # Reading every worker's files is file I/O: off the event loop, so requests keep flowing.
    body = await asyncio.to_thread(metrics.exposition)
    return Response(body, headers={"Content-Type": metrics.CONTENT_TYPE})


def _get_only(path: str, endpoint: object) -> Route:
    # web/middleware.route() would import this module back; same thing: GET without HEAD.
    found = Route(path, endpoint, methods=["GET"])  # type: ignore[arg-type]
    found.methods = {"GET"}
    return found


ROUTES: list[BaseRoute] = [_get_only("/metrics", scrape)]


# A kind of answered request -> its series, for requests whose route and pool are known (every
# label follows from these): (app name, route template, method, status, namespace label, pool).
# Bounded, as clients choose namespaces (labels only once authenticated, see above).
_kinds: dict[tuple[str, str, str, int, str, str], metrics.RequestSeries] = {}
KINDS_KEPT = 4096


def record(scope: Scope, status: int, seconds: float) -> None:
    """Counts a finished request and its latency by app, route template, method and status.

    On the data app it also feeds lmstfy's own HTTP families (pool, namespace, gin-style api).
    A metric that cannot be written fails no request (metrics/recording.py).
    """
    state = scope.get("state", {})
    route, pool = matched_route(scope), state.get("pool")
    app_name: str = getattr(scope["app"].state, "name", "")
    key = None
    if route is not None and pool is not None:
        key = (app_name, route.path, scope["method"], status, state.get(LABELLED_NAMESPACE, ""), pool)
        found = _kinds.get(key)
        if found is not None:
            found.observe(seconds)
            return
    made = _series_of(scope, app_name, route, status)
    if made is None:
        return
    if key is not None:
        if len(_kinds) >= KINDS_KEPT:
            _kinds.clear()
        _kinds[key] = made
    made.observe(seconds)


def _series_of(scope: Scope, name: str, route: Route | None, status: int) -> metrics.RequestSeries | None:
    """The series of a request of app `name` that `route` (matched_route's) took."""
    app = scope["app"]
    template = route.path if route is not None else UNMATCHED
    method = scope["method"] if scope["method"] in METHODS else "other"  # any token is a method to HTTP
    lmstfy = None
    if name == "data":
        api = gin_path(template) if route is not None else ""  # gin's FullPath of no route
        ns = scope.get("state", {}).get(LABELLED_NAMESPACE, "")
        lmstfy = _pool(scope, app, route), ns, api
    return metrics.request_series(name, method, template, status, lmstfy)


def matched_route(scope: Scope) -> Route | None:
    """The route that took the request, also when a middleware answered before routing (admin auth)."""
    route = scope.get("route")
    if route is None:
        route = next((r for r in scope["app"].routes if r.matches(scope)[0] is not Match.NONE), None)
    # A path whose route wants another method was not taken (both apps answer 404, as gin).
    if isinstance(route, Route) and route.methods and scope["method"] in route.methods:
        return route
    return None


@functools.cache
def gin_path(template: str) -> str:
    """A route template as lmstfy's gin router spells it: /api/{ns}/{queue} -> /api/:namespace/:queue."""
    return _PARAM.sub(lambda m: ":" + _GIN_PARAMS.get(m[1], m[1]), template)


def _pool(scope: Scope, app: object, route: Route | None) -> str:
    """The pool of the request's token ("default" without a prefix), as lmstfy; "" if no such pool."""
    runtime = getattr(getattr(app, "state", None), "runtime", None)
    if route is None or runtime is None:
        return ""
    known: str | None = scope.get("state", {}).get("pool")  # an existing pool, noted by data._authorize
    if known is not None:
        return known
    pool, _ = params.split_token(params.request_token(Request(scope)))
    return pool if pool in runtime.pools else ""
