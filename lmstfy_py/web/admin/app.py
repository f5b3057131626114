"""The admin app (default 127.0.0.1:7778): version, pools and engine info.

Other admin concerns live in their own modules, each exporting ROUTES, assembled here:
tokens, limits (throttle limits), ops (namespaces, dead letters, access log),
web/instrument.py (/metrics) and web/dashboard (the HTML dashboard under /ui)."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import SKIP_TOKEN_CHECK_WARNING, build_info
from lmstfy_py.admin.logins import Logins
from lmstfy_py.runtime import Runtime
from lmstfy_py.store import health
from lmstfy_py.store.faults import outage_reason
from lmstfy_py.web import dashboard, instrument
from lmstfy_py.web.admin import limits, ops, pushers, schedules, tokens
from lmstfy_py.web.admin.auth import AdminAuthMiddleware
from lmstfy_py.web.admin.cross_site import CrossSiteMiddleware
from lmstfy_py.web.admin.hosts import HostCheckMiddleware, configured_names
from lmstfy_py.web.admin.request import engine_of, runtime_of
from lmstfy_py.web.middleware import build_app, route


async def version(request: Request) -> Response:
    return JSONResponse(request.app.state.build_info)


async def pools(request: Request) -> Response:
    return JSONResponse(runtime_of(request).pools.names())


async def ready(request: Request) -> Response:
    """Readiness: 200 when every pool answers PING (within health.PROBE_TIMEOUT_S), else 503 naming
    the pools that do not and why. Liveness stays /version: a process whose Redis is away is
    alive, and restarting it would not bring Redis back."""
    runtime = runtime_of(request)
    names = runtime.pools.names()
    outages = await asyncio.gather(*(health.probe(engine) for engine in runtime.pools.engines()))
    pools = {
        name: "ok" if outage is None else outage_reason(outage) for name, outage in zip(names, outages, strict=True)
    }
    failing = [f"{name} ({state})" for name, state in pools.items() if state != "ok"]
    # -sv: said on every readiness check, so that a server left in development mode is noticed.
    warning = {"warning": SKIP_TOKEN_CHECK_WARNING} if runtime.config.server.skip_token_check else {}
    if not failing:
        return JSONResponse({"ready": True, "pools": pools, **warning})
    error = "pools not answering: " + ", ".join(failing)
    return JSONResponse({"ready": False, "error": error, "pools": pools, **warning}, 503)


def _state(outage: Exception | None) -> str:
    return "ok" if outage is None else outage_reason(outage) or "unavailable"


async def info(request: Request) -> Response:
    """lmstfy's shape: {namespace: [queue, ...]} for the pool's namespaces that ever had a job."""
    engine = engine_of(request)
    return JSONResponse({ns: await engine.queues(ns) for ns in await engine.namespaces()})


ROUTES = [
    route("/version", "GET", version),
    route("/pools", "GET", pools),
    route("/ready", "GET", ready),
    route("/info", "GET", info),
    *tokens.ROUTES,
    *limits.ROUTES,
    *ops.ROUTES,
    *pushers.ROUTES,
    *schedules.ROUTES,
    *instrument.ROUTES,
    *dashboard.ROUTES,
]


def create_admin_app(runtime: Runtime) -> Starlette:
    config = runtime.config
    # The host check first: a DNS-rebinding page must not even spend an address's failed logins.
    names = configured_names(config.server.admin_host, config.admin_allowed_hosts)
    hosts = Middleware(HostCheckMiddleware, names=names)
    logins = Logins(runtime.pools.own(config.admin_pool).redis)
    app = build_app(
        runtime,
        ROUTES,
        inner=[hosts, Middleware(CrossSiteMiddleware), Middleware(AdminAuthMiddleware, logins=logins)],
        body_timeout=config.server.body_timeout,
    )
    app.state.build_info = build_info()
    app.state.dashboard = dashboard.dashboard(runtime)
    app.state.name = "admin"  # the `app` label of its metrics (web/instrument.py)
    return app
