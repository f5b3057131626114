"""Recurring jobs (SPEC section 9): a queue's schedules on the data port (with the namespace's
token), and a namespace's on the admin port (GET /cron/{ns}, DELETE /cron/{ns}/{queue}/{name}).

PUT /api/{ns}/{queue}/cron/{name}?cron=EXPR|every=S&tz=&ttl=&tries=&priority=&catchup=one|none,
body = the data of each job: 201 {"msg":"scheduled","next_ms"}, 200 when it replaced one; 409 for
a new one past the server's max_schedules_per_namespace.
Registering is not publishing: it takes no unit of the token's produce limit, nor do the jobs
the schedule publishes.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import schedules
from lmstfy_py.admin.grants import MANAGE, READ
from lmstfy_py.config import NAME_RE, UINT16_MAX, Config
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.schedules import Schedule, ScheduleState
from lmstfy_py.web import params
from lmstfy_py.web.answers import no_content
from lmstfy_py.web.middleware import route
from lmstfy_py.web.target import runtime_of, target_of

DEFAULT_TZ = "UTC"


def name_of(request: Request) -> str:
    return check_name(request.path_params["name"])


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name) or len(name) > params.MAX_NAME_BYTES:
        raise InvalidParameter("invalid schedule name: letters, digits, - and _ only, at most 255")
    return name


def schedule_from(queue: str, name: str, query: QueryParams, body: bytes, config: Config) -> Schedule:
    """The schedule a PUT asks for, under the server's limits; 400 for anything malformed."""
    defaults, server = config.defaults, config.server
    cron, every = query.get("cron"), query.get("every")
    if (cron is None) == (every is None):
        raise InvalidParameter("give cron=EXPR or every=SECONDS (one of them)")
    every_s = None if every is None else every_of(query, server.min_schedule_every)
    tries = params.uint(query, "tries", defaults.tries, UINT16_MAX)
    if tries == 0:
        raise InvalidParameter("tries shouldn't be zero")
    return Schedule(
        name=name,
        queue=queue,
        cron=None if cron is None else schedules.cron_expression(cron),
        every_s=every_s,
        tz=schedules.time_zone(query.get("tz") or DEFAULT_TZ),
        body=body,
        ttl_ms=params.seconds(query, "ttl", defaults.ttl) * 1000,
        tries=tries,
        priority=params.uint(query, "priority", 0, params.MAX_PRIORITY),
        catchup="one" if params.choice(query, "catchup", schedules.CATCHUPS, default="one") == "one" else "none",
    )


def every_of(query: QueryParams, minimum: int) -> int:
    """every=S, whole seconds; the floor keeps one tenant's schedules from taking the server's CPU.

    0 (never a period) stays the plain "invalid every" it always was; a period under the server's
    floor says the floor, which a client cannot know otherwise.
    """
    every_s = params.uint(query, "every", 0, schedules.MAX_EVERY_S, minimum=1)
    if every_s < minimum:
        raise InvalidParameter(f"invalid every: must be at least {minimum} second{'' if minimum == 1 else 's'}")
    return every_s


def state_json(state: ScheduleState, with_queue: bool = False) -> dict[str, Any]:
    """As the data port shows it; the admin port, listing a whole namespace, adds its queue."""
    shown = state.shown()
    return {"queue": state.schedule.queue, **shown} if with_queue else shown


# -- the data port ------------------------------------------------------------------------------


async def put(request: Request) -> Response:
    target, name = await target_of(request, MANAGE), name_of(request)
    body = await params.read_body(request)
    schedule = schedule_from(target.queue, name, request.query_params, body, runtime_of(request).config)
    cap = runtime_of(request).config.server.max_schedules_per_namespace
    created, first = await target.store.put_schedule(target.ns, schedule, cap)
    return JSONResponse({"msg": "scheduled", "next_ms": first}, status_code=201 if created else 200)


async def list_queue(request: Request) -> Response:
    target = await target_of(request, READ)
    found = await target.store.schedules(target.ns, target.queue)
    return JSONResponse({"schedules": [state_json(state) for state in found]})


async def get_one(request: Request) -> Response:
    target, name = await target_of(request, READ), name_of(request)
    return JSONResponse(state_json(await target.store.schedule(target.ns, target.queue, name)))


async def delete(request: Request) -> Response:
    target, name = await target_of(request, MANAGE), name_of(request)
    await target.store.delete_schedule(target.ns, target.queue, name)
    return no_content()


SCHEDULE = "/api/{ns}/{queue}/cron/{name}"
ROUTES = [
    route("/api/{ns}/{queue}/cron", "GET", list_queue),
    route(SCHEDULE, "PUT", put),
    route(SCHEDULE, "GET", get_one),
    route(SCHEDULE, "DELETE", delete),
]
