"""Admin routes for throttle limits: /limits and /token/{ns}/{token}/limit, as lmstfy's.

The {token} segment takes the data plane's "[pool:]token" form. A limit may be set for a token
that does not exist (yet), as in lmstfy; deleting a token deletes its limit.
"""

from __future__ import annotations

from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from lmstfy_py.errors import InvalidParameter, NotFound
from lmstfy_py.web import limit_params, params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.admin.request import namespace_of, runtime_of
from lmstfy_py.web.middleware import route


def _token_of(request: Request) -> tuple[str, str, str]:
    """The pool, namespace and token the path names."""
    ns = namespace_of(request)
    pool, token = params.split_token(request.path_params["token"])
    if not token:
        raise InvalidParameter("invalid token")
    return pool, ns, token


async def list_limits(request: Request) -> Response:
    found = await runtime_of(request).limits.list_all()
    return JSONResponse([replace(entry, token=readonly.shown(request.scope, entry.token)).as_json() for entry in found])


async def get_limit(request: Request) -> Response:
    limit = await runtime_of(request).limits.get(*_token_of(request))
    if limit is None:
        raise NotFound("limit not found")
    return JSONResponse(limit.as_json())


async def create_limit(request: Request) -> Response:
    where = _token_of(request)
    limit = limit_params.limiter(await params.read_body(request))
    await runtime_of(request).limits.create(*where, limit)
    return JSONResponse({"limiter": limit.as_json()}, status_code=201)


async def set_limit(request: Request) -> Response:
    """Creates or replaces the limit: lmstfy's PUT does both."""
    where = _token_of(request)
    limit = limit_params.limiter(await params.read_body(request))
    await runtime_of(request).limits.set(*where, limit)
    return JSONResponse({"limiter": limit.as_json()})


async def delete_limit(request: Request) -> Response:
    """lmstfy's answer whether or not the token had a limit: deleting is idempotent."""
    await runtime_of(request).limits.delete(*_token_of(request))
    return JSONResponse({"msg": "success"})


LIMIT = "/token/{ns}/{token}/limit"
ROUTES: list[BaseRoute] = [
    route("/limits", "GET", list_limits),
    route(LIMIT, "GET", get_limit),
    route(LIMIT, "POST", create_limit),
    route(LIMIT, "PUT", set_limit),
    route(LIMIT, "DELETE", delete_limit),
]
