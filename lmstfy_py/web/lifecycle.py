"""Beyond lmstfy (SPEC section 7), on the data plane: a worker's verbs on the job it reserved
(release, touch, bury), a delayed job's promote (SPEC 14), a queue's stats and pause, and its dead
letter job by job.

The dead letter by id, promote and pause are on the admin port too (web/admin/ops.py), with the same
answers: the functions taking a store serve both.
"""

from __future__ import annotations

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import ids
from lmstfy_py.admin.grants import CONSUME, MANAGE, READ
from lmstfy_py.config import UINT16_MAX, Defaults
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import params
from lmstfy_py.web.answers import dead_page_json, message, no_content, released, stats_json
from lmstfy_py.web.middleware import route
from lmstfy_py.web.target import defaults_of, job_id_of, target_of

DEAD_PAGE_DEFAULT = 10

# -- a worker's verbs ----------------------------------------------------------------------


async def release(request: Request) -> Response:
    """PUT .../job/{id}/release?delay=S|delay_ms=MS&reason=TEXT&untried=1: ready again after the delay
    (default: the job's backoff; at once if untried), or buried when no tries are left."""
    target = await target_of(request, CONSUME)
    query = request.query_params
    delay_ms = params.optional_milliseconds(query, "delay")
    untried = params.choice(query, "untried", ("0", "1"), default="0") == "1"
    job_id = job_id_of(request)
    result = await target.store.release(target.ns, target.queue, job_id, delay_ms, params.reason(query), untried)
    return released(result)


async def touch(request: Request) -> Response:
    """PUT .../job/{id}/touch?ttr=S|ttr_ms=MS: the reservation now ends ttr from now."""
    target = await target_of(request, CONSUME)
    ttr_ms = params.milliseconds(request.query_params, "ttr", defaults_of(request).ttr)
    if ttr_ms == 0:
        raise InvalidParameter("invalid ttr")
    due_ms = await target.store.touch(target.ns, target.queue, job_id_of(request), ttr_ms)
    return JSONResponse({"msg": "touched", "due_ms": due_ms})


async def bury(request: Request) -> Response:
    """PUT .../job/{id}/bury?reason=TEXT: to the dead letter now."""
    target = await target_of(request, CONSUME)
    await target.store.bury(target.ns, target.queue, job_id_of(request), params.reason(request.query_params))
    return message("buried")


async def promote_job(store: JobStore, ns: str, queue: str, job_id: str) -> Response:
    """A delayed job ready now, as if it had come due (SPEC 14): the data route and its admin twin."""
    await store.promote(ns, queue, job_id)
    return message("promoted")


async def promote(request: Request) -> Response:
    """PUT .../job/{id}/promote: 409 for a job that is not delayed, 404 for none."""
    target = await target_of(request, MANAGE)
    return await promote_job(target.store, target.ns, target.queue, job_id_of(request))


# -- a queue -------------------------------------------------------------------------------


async def stats(request: Request) -> Response:
    target = await target_of(request, READ)
    return JSONResponse(stats_json(target.ns, target.queue, await target.store.stats(target.ns, target.queue)))


async def pause_queue(store: JobStore, ns: str, queue: str, paused: bool) -> Response:
    await store.pause(ns, queue, paused)
    return message("paused" if paused else "resumed")


async def pause(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    return await pause_queue(target.store, target.ns, target.queue, paused=True)


async def resume(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    return await pause_queue(target.store, target.ns, target.queue, paused=False)


# -- the dead letter, job by job -------------------------------------------------------------


async def dead_page(store: JobStore, ns: str, queue: str, query: QueryParams) -> Response:
    """?limit=N&after=ID: the next N dead jobs (oldest first) after ID, with "next" for the page after."""
    limit = params.uint(query, "limit", DEAD_PAGE_DEFAULT, params.MAX_DEAD_PAGE, minimum=1)
    after = query.get("after") or None
    if after is not None and not ids.is_acceptable(after):
        raise InvalidParameter("invalid after")
    return JSONResponse(dead_page_json(await store.dead_page(ns, queue, limit, after)))


async def respawn_dead_job(
    store: JobStore, ns: str, queue: str, job_id: str, query: QueryParams, defaults: Defaults
) -> Response:
    """?ttl=&tries=&delay=: that one dead job back to ready, with a fresh ttl and tries (default 1)."""
    ttl_ms = params.seconds(query, "ttl", defaults.ttl) * 1000
    delay_ms = params.milliseconds(query, "delay", 0)
    if 0 < ttl_ms < delay_ms:
        raise InvalidParameter("ttl is shorter than delay")
    tries = params.uint(query, "tries", 1, UINT16_MAX, minimum=1)
    await store.respawn_one(ns, queue, job_id, ttl_ms, tries, delay_ms)
    return JSONResponse({"msg": "respawned", "count": 1})


async def delete_dead_job(store: JobStore, ns: str, queue: str, job_id: str) -> Response:
    await store.delete_dead_one(ns, queue, job_id)
    return no_content()


async def dead_jobs(request: Request) -> Response:
    target = await target_of(request, READ)
    return await dead_page(target.store, target.ns, target.queue, request.query_params)


async def respawn_dead(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    job_id, query = job_id_of(request), request.query_params
    return await respawn_dead_job(target.store, target.ns, target.queue, job_id, query, defaults_of(request))


async def delete_dead(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    return await delete_dead_job(target.store, target.ns, target.queue, job_id_of(request))


JOB = "/api/{ns}/{queue}/job/{job_id}"
DEAD_JOB = "/api/{ns}/{queue}/deadletter/job/{job_id}"
ROUTES = [
    route(JOB + "/release", "PUT", release),
    route(JOB + "/touch", "PUT", touch),
    route(JOB + "/bury", "PUT", bury),
    route(JOB + "/promote", "PUT", promote),
    route("/api/{ns}/{queue}/stats", "GET", stats),
    route("/api/{ns}/{queue}/pause", "PUT", pause),
    route("/api/{ns}/{queue}/pause", "DELETE", resume),
    route("/api/{ns}/{queue}/deadletter/jobs", "GET", dead_jobs),
    route(DEAD_JOB, "PUT", respawn_dead),
    route(DEAD_JOB, "DELETE", delete_dead),
]
