"""Admin routes for operators: namespaces, dead letters, the access-log switch.

Beyond lmstfy: an operator lists and deletes whole namespaces and rescues a queue's dead
jobs without the tenant's token. Every route takes `?pool=` (default "default"); an
unknown pool answers 400 {"error":"pool not found"}, as lmstfy's token routes do.
"""

from __future__ import annotations

import base64
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from lmstfy_py.errors import NotFound
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import Job
from lmstfy_py.web import events, lifecycle, outcomes, params
from lmstfy_py.web.admin.request import engine_of, namespace_of, pool_of, runtime_of
from lmstfy_py.web.middleware import route
from lmstfy_py.web.target import job_id_of

DEAD_PEEK_DEFAULT = 10
DEAD_PEEK_MAX = 100
ADMIN_PARAMETERS = ("pool",)  # what an admin route's query carries besides its own

# -- namespaces ----------------------------------------------------------------------


async def _queue_json(engine: JobStore, ns: str, queue: str) -> dict[str, Any]:
    size, dead = await engine.size(ns, queue), await engine.dead_letter_size(ns, queue)
    return {"queue": queue, "size": size, "deadletter_size": dead}


async def _namespace_json(request: Request, engine: JobStore, ns: str) -> dict[str, Any]:
    tokens = await runtime_of(request).tokens.list_tokens(pool_of(request), ns)
    return {
        "namespace": ns,
        "tokens": len(tokens),
        "timer_size": await engine.timer_size(ns),
        "queues": [await _queue_json(engine, ns, queue) for queue in await engine.queues(ns)],
    }


async def list_namespaces(request: Request) -> Response:
    """Namespaces that ever had a job, and namespaces that have tokens, by name."""
    engine, pool = engine_of(request), pool_of(request)
    names = set(await engine.namespaces()) | set(await runtime_of(request).tokens.namespaces(pool))
    found = [await _namespace_json(request, engine, ns) for ns in sorted(names)]
    return JSONResponse({"pool": pool, "namespaces": found})


async def delete_namespace(request: Request) -> Response:
    """Deletes the namespace's tokens and their limits; with purge=true, every job of it too.

    Tokens go first, so that tenants stop publishing before the jobs are purged.
    """
    ns, engine, pool = namespace_of(request), engine_of(request), pool_of(request)
    purge = params.choice(request.query_params, "purge", ("true", "false"), default="false") == "true"
    runtime = runtime_of(request)
    tokens = await runtime.tokens.delete_namespace(pool, ns)
    limits = await runtime.limits.delete_namespace(pool, ns)
    jobs = await engine.purge_namespace(ns) if purge else 0
    return JSONResponse({"namespace": ns, "tokens_deleted": tokens, "limits_deleted": limits, "jobs_deleted": jobs})


# -- dead letters --------------------------------------------------------------------


def _queue_target(request: Request) -> tuple[JobStore, str, str]:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return engine_of(request), ns, queue


def _dead_job_json(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "data": base64.b64encode(job.body).decode("ascii"),
        "ttl": job.ttl,
        "elapsed_ms": job.elapsed_ms,
        "attributes": job.attributes or None,
    }


async def _peek_jobs(engine: JobStore, ns: str, queue: str, job_ids: list[str]) -> list[dict[str, Any]]:
    jobs = []
    for job_id in job_ids:
        try:
            jobs.append(_dead_job_json((await engine.peek_job(ns, queue, job_id)).job))
        except NotFound:
            continue  # respawned or deleted since the ids were read
    return jobs


async def peek_dead_letter(request: Request) -> Response:
    """The oldest `limit` dead jobs, oldest first, with their data."""
    engine, ns, queue = _queue_target(request)
    limit = params.uint(request.query_params, "limit", DEAD_PEEK_DEFAULT, DEAD_PEEK_MAX, minimum=1)
    dead = await engine.dead_letter(ns, queue)
    jobs = await _peek_jobs(engine, ns, queue, await engine.dead_letter_ids(ns, queue, limit))
    return JSONResponse(
        {"namespace": ns, "queue": queue, "deadletter_size": dead.size, "deadletter_head": dead.head, "jobs": jobs}
    )


async def respawn_dead_letter(request: Request) -> Response:
    """As the data plane's respawn: up to `limit` oldest dead jobs back to ready with a fresh ttl."""
    engine, ns, queue = _queue_target(request)
    limit = params.limit(request.query_params)
    ttl = params.seconds(request.query_params, "ttl", runtime_of(request).config.defaults.ttl)
    count = await engine.respawn(ns, queue, limit, ttl * 1000)
    return JSONResponse({"msg": "respawned", "count": count})


async def delete_dead_letter(request: Request) -> Response:
    """Deletes up to `limit` oldest dead jobs; unlike the data plane's 204, says how many."""
    engine, ns, queue = _queue_target(request)
    count = await engine.delete_dead(ns, queue, params.limit(request.query_params))
    return JSONResponse({"msg": "deleted", "count": count})


async def dead_jobs(request: Request) -> Response:
    """Beyond lmstfy, as the data plane's GET .../deadletter/jobs: a page of dead jobs with reasons."""
    engine, ns, queue = _queue_target(request)
    return await lifecycle.dead_page(engine, ns, queue, request.query_params)


async def respawn_dead_job(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    defaults = runtime_of(request).config.defaults
    return await lifecycle.respawn_dead_job(engine, ns, queue, job_id_of(request), request.query_params, defaults)


async def delete_dead_job(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    return await lifecycle.delete_dead_job(engine, ns, queue, job_id_of(request))


# -- pause ---------------------------------------------------------------------------


async def pause(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    return await lifecycle.pause_queue(engine, ns, queue, paused=True)


async def resume(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    return await lifecycle.pause_queue(engine, ns, queue, paused=False)


async def promote(request: Request) -> Response:
    """An operator's promote of a delayed job (SPEC 14 gives it only to the data plane)."""
    engine, ns, queue = _queue_target(request)
    return await lifecycle.promote_job(engine, ns, queue, job_id_of(request))


# -- job outcomes (SPEC 13) ---------------------------------------------------------


async def get_settings(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    return await outcomes.show_settings(engine, ns, queue)


async def put_settings(request: Request) -> Response:
    engine, ns, queue = _queue_target(request)
    return await outcomes.change_settings(engine, ns, queue, request.query_params, ADMIN_PARAMETERS)


async def look_up_job(request: Request) -> Response:
    """A job live or ended, as the data plane's GET .../job/{id} shows it."""
    engine, ns, queue = _queue_target(request)
    return await outcomes.look_up(engine, ns, queue, job_id_of(request))


async def queue_events(request: Request) -> Response:
    """A queue's event stream, as the data plane's GET .../events streams it (the dashboard's live tail)."""
    engine, ns, queue = _queue_target(request)
    return await events.stream(engine, ns, [queue], events.cursor_of(request), events.heartbeat_s(request))


# -- access log ----------------------------------------------------------------------


def _access_log_json(enabled: bool) -> Response:
    return JSONResponse({"status": "enabled" if enabled else "disabled"})


async def get_access_log(request: Request) -> Response:
    # The stored switch, not this process's copy: a POST just answered by another worker has not reached it yet.
    return _access_log_json(await runtime_of(request).access_log_switch.current())


async def set_access_log(request: Request) -> Response:
    """lmstfy's switch: ?status=enable|disable. Here at once, on every process within a second."""
    status = params.choice(request.query_params, "status", ("enable", "disable"))
    runtime = runtime_of(request)
    await runtime.access_log_switch.set(status == "enable")
    return _access_log_json(runtime.access_log)


DEAD_LETTER = "/deadletter/{ns}/{queue}"
ROUTES: list[BaseRoute] = [
    route("/namespaces", "GET", list_namespaces),
    route("/namespaces/{ns}", "DELETE", delete_namespace),
    route(DEAD_LETTER, "GET", peek_dead_letter),
    route(DEAD_LETTER, "PUT", respawn_dead_letter),
    route(DEAD_LETTER, "DELETE", delete_dead_letter),
    route(DEAD_LETTER + "/jobs", "GET", dead_jobs),
    route(DEAD_LETTER + "/job/{job_id}", "PUT", respawn_dead_job),
    route(DEAD_LETTER + "/job/{job_id}", "DELETE", delete_dead_job),
    route("/queues/{ns}/{queue}/pause", "PUT", pause),
    route("/queues/{ns}/{queue}/pause", "DELETE", resume),
    route("/queues/{ns}/{queue}/settings", "GET", get_settings),
    route("/queues/{ns}/{queue}/settings", "PUT", put_settings),
    route("/queues/{ns}/{queue}/job/{job_id}", "GET", look_up_job),
    route("/queues/{ns}/{queue}/job/{job_id}/promote", "PUT", promote),
    route("/queues/{ns}/{queue}/events", "GET", queue_events),
    route("/accesslog", "GET", get_access_log),
    route("/accesslog", "POST", set_access_log),
]
