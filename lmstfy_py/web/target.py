"""The data routes' checks (web/hot_routes.py's) applied to a Starlette Request: its Target, the job
id of its path, its throttle, and its Call for the hot routes' work.
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from starlette.requests import Request

from lmstfy_py.config import Defaults
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import params
from lmstfy_py.web.hot_routes import Action, Call, Scope, Target, Throttle, check_token, checked_job_id, shared_query


def runtime_of(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def defaults_of(request: Request) -> Defaults:
    return runtime_of(request).config.defaults


async def authorize(request: Request, ns: str, queue: str, scope: Scope) -> Target:
    state: dict[str, Any] = request.scope.setdefault("state", {})  # what request.state sets
    return await check_token(runtime_of(request), state, ns, queue, params.request_token(request), scope)


async def target_of(request: Request, scope: Scope) -> Target:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return await authorize(request, ns, queue, scope)


def job_id_of(request: Request) -> str:
    """The job id of the path: one of ours, or one a business chose."""
    return checked_job_id(request.path_params["job_id"])


def throttle(request: Request, target: Target, action: Action) -> Throttle:
    return Throttle(runtime_of(request).limits, target, action)


def call_of(request: Request) -> Call:
    """The Call of a request the data app routed."""
    path = request.path_params
    scope = request.scope
    state: dict[str, Any] = scope.setdefault("state", {})
    query = shared_query(scope["query_string"])
    read_body = partial(params.read_body, request)
    job_id = path.get("job_id", "")
    return Call(runtime_of(request), state, path["ns"], path["queue"], query, request.headers, read_body, job_id)
