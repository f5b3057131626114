"""The admin app (default 127.0.0.1:7778): version, pools, engine info and tokens.

Other admin concerns live in their own modules, each exporting ROUTES, assembled here:
admin_limits (throttle limits), admin_ops (namespaces, dead letters, access log),
instrument (/metrics)."""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import __version__
from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import admin_limits, admin_ops, instrument, params
from lmstfy_py.web.admin_request import engine_of, namespace_of, pool_of, runtime_of
from lmstfy_py.web.auth import AdminAuthMiddleware
from lmstfy_py.web.middleware import build_app, route

MIN_USER_TOKEN_LEN = 20


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


async def list_tokens(request: Request) -> Response:
    ns = namespace_of(request)
    tokens = await runtime_of(request).tokens.list_tokens(pool_of(request), ns)
    return JSONResponse({"tokens": tokens})


async def create_token(request: Request) -> Response:
    body = await params.read_body(request)
    form = params.form_values(body, request.headers.get("content-type", ""), request.query_params)
    description, user_token = form.get("description", ""), form.get("token", "")
    if not description:
        raise InvalidParameter("invalid description")
    if user_token and len(user_token) < MIN_USER_TOKEN_LEN:
        raise InvalidParameter("the user token was too short")
    ns = namespace_of(request)
    pool, token = pool_of(request), user_token or None
    # lmstfy takes "pool:token" only with exactly one ':'; anything else is all token.
    if user_token.count(":") == 1:
        pool, token = user_token.split(":")
    created = await runtime_of(request).tokens.create(pool, ns, description, token)
    shown = created if pool == DEFAULT_POOL else f"{pool}:{created}"
    return JSONResponse({"token": shown}, status_code=201)


async def delete_token(request: Request) -> Response:
    ns = namespace_of(request)
    pool, token = params.split_token(request.path_params["token"])
    await runtime_of(request).tokens.delete(pool, ns, token)
    await runtime_of(request).limits.delete(pool, ns, token)
    return Response(status_code=204)


ROUTES = [
    route("/version", "GET", version),
    route("/pools", "GET", pools),
    route("/info", "GET", info),
    route("/token/{ns}", "GET", list_tokens),
    route("/token/{ns}", "POST", create_token),
    route("/token/{ns}/{token}", "DELETE", delete_token),
    *admin_limits.ROUTES,
    *admin_ops.ROUTES,
    *instrument.ROUTES,
]


def create_admin_app(runtime: Runtime) -> Starlette:
    app = build_app(runtime, ROUTES, inner=[Middleware(AdminAuthMiddleware)])
    app.state.build_info = _build_info()
    app.state.name = "admin"  # the `app` label of its metrics (web/instrument.py)
    return app
