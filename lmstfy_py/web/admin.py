"""The admin app (default 127.0.0.1:7778): version, pools, engine info and tokens."""

from __future__ import annotations

import os
from typing import cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import __version__
from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.engine import Engine
from lmstfy_py.web import params
from lmstfy_py.web.middleware import build_app, route

MIN_USER_TOKEN_LEN = 20


def _runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def _pool(request: Request) -> str:
    return request.query_params.get("pool") or DEFAULT_POOL


def _namespace(request: Request) -> str:
    ns: str = request.path_params["ns"]
    params.check_namespace(ns, too_long="the namespace name was too long")
    return ns


def _engine(request: Request) -> Engine:
    runtime, pool = _runtime(request), _pool(request)
    # Admin routes answer an unknown pool with 400, as lmstfy's token routes do.
    if pool not in runtime.pools:
        raise InvalidParameter("pool not found")
    return runtime.pools.get(pool)


def _build_info() -> dict[str, str]:
    return {
        "version": __version__,
        "build_commit": os.environ.get("LMSTFY_BUILD_COMMIT") or "unknown",
        "build_date": os.environ.get("LMSTFY_BUILD_DATE") or "unknown",
    }


async def version(request: Request) -> Response:
    return JSONResponse(request.app.state.build_info)


async def pools(request: Request) -> Response:
    return JSONResponse(_runtime(request).pools.names())


async def info(request: Request) -> Response:
    """lmstfy's shape: {namespace: [queue, ...]} for the pool's namespaces that ever had a job."""
    engine = _engine(request)
    return JSONResponse({ns: await engine.queues(ns) for ns in await engine.namespaces()})


async def list_tokens(request: Request) -> Response:
    ns = _namespace(request)
    tokens = await _runtime(request).tokens.list_tokens(_pool(request), ns)
    return JSONResponse({"tokens": tokens})


async def create_token(request: Request) -> Response:
    body = await params.read_body(request)
    form = params.form_values(body, request.headers.get("content-type", ""), request.query_params)
    description, user_token = form.get("description", ""), form.get("token", "")
    if not description:
        raise InvalidParameter("invalid description")
    if user_token and len(user_token) < MIN_USER_TOKEN_LEN:
        raise InvalidParameter("the user token was too short")
    ns = _namespace(request)
    pool, token = _pool(request), user_token or None
    # lmstfy takes "pool:token" only with exactly one ':'; anything else is all token.
    if user_token.count(":") == 1:
        pool, token = user_token.split(":")
    created = await _runtime(request).tokens.create(pool, ns, description, token)
    shown = created if pool == DEFAULT_POOL else f"{pool}:{created}"
    return JSONResponse({"token": shown}, status_code=201)


async def delete_token(request: Request) -> Response:
    ns = _namespace(request)
    pool, token = params.split_token(request.path_params["token"])
    await _runtime(request).tokens.delete(pool, ns, token)
    return Response(status_code=204)


ROUTES = [
    route("/version", "GET", version),
    route("/pools", "GET", pools),
    route("/info", "GET", info),
    route("/token/{ns}", "GET", list_tokens),
    route("/token/{ns}", "POST", create_token),
    route("/token/{ns}/{token}", "DELETE", delete_token),
]


def create_admin_app(runtime: Runtime) -> Starlette:
    app = build_app(runtime, ROUTES)
    app.state.build_info = _build_info()
    return app
