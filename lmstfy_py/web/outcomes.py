"""Beyond lmstfy (SPEC section 13), on the data plane: a queue's settings, completing a job with a result,
and waiting for a job's end.

The settings and the job look-up are on the admin port too (web/admin/ops.py), with the same answers:
the functions taking a store serve both. `keep` on publish is parsed with publish's other options
(web/params.py).
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.admin.grants import CONSUME, MANAGE, READ
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import outcome_params, params
from lmstfy_py.web.answers import job_info_json, message, settings_json
from lmstfy_py.web.middleware import route
from lmstfy_py.web.target import job_id_of, target_of

# What a data route's query may carry besides the settings: its token.
TOKEN_PARAMETERS = ("token",)

# -- settings -----------------------------------------------------------------------------------


async def show_settings(store: JobStore, ns: str, queue: str) -> Response:
    return JSONResponse(settings_json(ns, queue, await store.queue_settings(ns, queue)))


async def change_settings(
    store: JobStore, ns: str, queue: str, query: QueryParams, also_allowed: Collection[str]
) -> Response:
    """PUT ...settings?keep=S&rate=R...: those given, checked whole first (a refused PUT changes nothing)."""
    settings = await store.set_queue_settings(ns, queue, outcome_params.settings_change(query, also_allowed))
    return JSONResponse(settings_json(ns, queue, settings))


async def look_up(store: JobStore, ns: str, queue: str, job_id: str) -> Response:
    """A job live or ended (its record, while kept): GET .../job/{id}."""
    return JSONResponse(job_info_json(await store.peek_job(ns, queue, job_id)))


async def get_settings(request: Request) -> Response:
    target = await target_of(request, READ)
    return await show_settings(target.store, target.ns, target.queue)


async def put_settings(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    return await change_settings(target.store, target.ns, target.queue, request.query_params, TOKEN_PARAMETERS)


# -- a job's end --------------------------------------------------------------------------------


async def complete(request: Request) -> Response:
    """PUT .../job/{id}/complete, body = the result (may be empty, at most 1 MiB): an ACK that keeps it."""
    target = await target_of(request, CONSUME)
    job_id = job_id_of(request)
    result = await params.read_body(request)
    await target.store.complete(target.ns, target.queue, job_id, result)
    return message("completed")


async def result(request: Request) -> Response:
    """GET .../job/{id}/result?wait=S: 200 with the job once it ended (waiting up to S for it), else 202
    with it as it is now. Not throttled: it reserves nothing, and a waiter costs the store one wake-up."""
    target = await target_of(request, READ)
    job_id = job_id_of(request)
    wait_ms = outcome_params.result_wait_ms(request.query_params)
    ended, info = await target.store.result(target.ns, target.queue, job_id, wait_ms)
    return JSONResponse(job_info_json(info), status_code=200 if ended else 202)


QUEUE = "/api/{ns}/{queue}"
ROUTES = [
    route(QUEUE + "/job/{job_id}/complete", "PUT", complete),
    route(QUEUE + "/job/{job_id}/result", "GET", result),
    route(QUEUE + "/settings", "GET", get_settings),
    route(QUEUE + "/settings", "PUT", put_settings),
]
