"""Admin routes for recurring jobs: every schedule of a namespace, and deleting one, without the
tenant's token. Registering one is the tenant's (the data port)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.web import params
from lmstfy_py.web.admin.request import engine_of, namespace_of
from lmstfy_py.web.answers import no_content
from lmstfy_py.web.middleware import route
from lmstfy_py.web.schedules import name_of, state_json


async def list_namespace(request: Request) -> Response:
    """GET /cron/{ns}?pool=: {"schedules": [{"queue", "name", ...}]}, by queue and name."""
    found = await engine_of(request).schedules(namespace_of(request))
    return JSONResponse({"schedules": [state_json(state, with_queue=True) for state in found]})


async def delete(request: Request) -> Response:
    ns, queue, name = namespace_of(request), request.path_params["queue"], name_of(request)
    params.check_names(ns, queue)
    await engine_of(request).delete_schedule(ns, queue, name)
    return no_content()


ROUTES = [
    route("/cron/{ns}", "GET", list_namespace),
    route("/cron/{ns}/{queue}/{name}", "DELETE", delete),
]
