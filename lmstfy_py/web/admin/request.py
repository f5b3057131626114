"""What every admin route reads from its request: the runtime, the pool, a namespace, an engine, a form."""

from __future__ import annotations

from typing import cast
from urllib.parse import parse_qsl

from starlette.datastructures import QueryParams
from starlette.requests import Request

from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import params


def runtime_of(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def pool_of(request: Request) -> str:
    return request.query_params.get("pool") or DEFAULT_POOL


def namespace_of(request: Request) -> str:
    ns: str = request.path_params["ns"]
    params.check_namespace(ns, too_long="the namespace name was too long")
    return ns


def engine_of(request: Request) -> JobStore:
    runtime, pool = runtime_of(request), pool_of(request)
    # Admin routes answer an unknown pool with 400, as lmstfy's token routes do.
    if pool not in runtime.pools:
        raise InvalidParameter("pool not found")
    return runtime.pools.get(pool)


def form_values(body: bytes, content_type: str, query: QueryParams) -> dict[str, str]:
    """Go's Request.Form: url-encoded body fields first, then query fields, first value wins."""
    merged: dict[str, str] = {}
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        for key, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
            merged.setdefault(key, value)
    for key, value in query.multi_items():
        merged.setdefault(key, value)
    return merged
