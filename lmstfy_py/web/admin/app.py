"""The admin app (default 127.0.0.1:7778): version, pools and engine info.

Other admin concerns live in their own modules, each exporting ROUTES, assembled here:
tokens, limits (throttle limits), ops (namespaces, dead letters, access log), and
web/instrument.py (/metrics)."""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import __version__
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import instrument
from lmstfy_py.web.admin import limits, ops, tokens
from lmstfy_py.web.admin.auth import AdminAuthMiddleware
from lmstfy_py.web.admin.request import engine_of, runtime_of
from lmstfy_py.web.middleware import build_app, route


def _build_info() -> dict[str, str]:
    return {
        "version": __version__,
        "build_commit": os.environ.get("LMSTFY_BUILD_COMMIT") or "unknown",
        "build_date": os.environ.get("LMSTFY_BUILD_DATE") or "unknown",
    }


async def version(request: Request) -> Response:
    return JSONResponse(request.app.state.build_info)


async def pools(request: Request) -> Response:
    return JSONResponse(runtime_of(request).pools.names())


async def info(request: Request) -> Response:
    """lmstfy's shape: {namespace: [queue, ...]} for the pool's namespaces that ever had a job."""
    engine = engine_of(request)
    return JSONResponse({ns: await engine.queues(ns) for ns in await engine.namespaces()})


ROUTES = [
    route("/version", "GET", version),
    route("/pools", "GET", pools),
    route("/info", "GET", info),
    *tokens.ROUTES,
    *limits.ROUTES,
    *ops.ROUTES,
    *instrument.ROUTES,
]


def create_admin_app(runtime: Runtime) -> Starlette:
    app = build_app(
        runtime, ROUTES, inner=[Middleware(AdminAuthMiddleware)], body_timeout=runtime.config.server.body_timeout
    )
    app.state.build_info = _build_info()
    app.state.name = "admin"  # the `app` label of its metrics (web/instrument.py)
    return app
