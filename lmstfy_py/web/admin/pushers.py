"""The pusher API of lmstfy 1.0.10 on the admin port (SPEC section 8): same routes, bodies and answers.

Differs (docs/API.md): a duplicate create answers 409 and deleting an unknown group 404 (lmstfy:
500 for both, with the same texts); GET /pusher/{ns} without `pool` lists the default pool's
groups (lmstfy: none); a pusher is shown with lmstfy-py's optional fields when set, and "signed"
(its secret itself never).
"""

from __future__ import annotations

import json
from collections import defaultdict

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.admin.pushers import pusher_from
from lmstfy_py.errors import InvalidParameter, NotFound
from lmstfy_py.web import params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.admin.request import namespace_of, pool_of, runtime_of
from lmstfy_py.web.middleware import route


async def _body(request: Request) -> object:
    try:
        return json.loads(await params.read_body(request))
    except (ValueError, RecursionError) as exc:
        raise InvalidParameter(f"invalid JSON: {exc}") from exc


def _group_of(request: Request) -> str:
    group: str = request.path_params["group"]
    params.check_names(namespace_of(request), group)
    return group


async def list_all(request: Request) -> Response:
    """{"pushers": {pool: {namespace: [group, ...]}}}."""
    shown: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for pool, ns, group in sorted(await runtime_of(request).pushers.all()):
        shown[pool][ns].append(group)
    return JSONResponse({"pushers": shown})


async def list_namespace(request: Request) -> Response:
    ns, pool = namespace_of(request), pool_of(request)
    found = await runtime_of(request).pushers.all()
    shown = {
        g: readonly.shown_pusher(request.scope, p) for (p_, n, g), p in sorted(found.items()) if (p_, n) == (pool, ns)
    }
    return JSONResponse({"pushers": shown})


async def get_one(request: Request) -> Response:
    pusher = await runtime_of(request).pushers.get(pool_of(request), namespace_of(request), _group_of(request))
    if pusher is None:
        raise NotFound("pusher was not found")
    return JSONResponse({"pusher": readonly.shown_pusher(request.scope, pusher)})


async def create(request: Request) -> Response:
    group, pusher = _group_of(request), pusher_from(await _body(request))
    await runtime_of(request).pushers.create(pool_of(request), namespace_of(request), group, pusher)
    return JSONResponse({"status": "created"}, status_code=201)


async def update(request: Request) -> Response:
    group, found = _group_of(request), await _body(request)
    await runtime_of(request).pushers.update(pool_of(request), namespace_of(request), group, found)
    return JSONResponse({"status": "ok"})


async def delete(request: Request) -> Response:
    await runtime_of(request).pushers.delete(pool_of(request), namespace_of(request), _group_of(request))
    return JSONResponse({"status": "deleted"})


GROUP = "/pusher/{ns}/{group}"
ROUTES = [
    route("/pushers", "GET", list_all),
    route("/pusher/{ns}", "GET", list_namespace),
    route(GROUP, "GET", get_one),
    route(GROUP, "POST", create),
    route(GROUP, "PUT", update),
    route(GROUP, "DELETE", delete),
]
