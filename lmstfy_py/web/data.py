"""The data-plane app (default port 7777): lmstfy's /api routes, and (web/lifecycle.py) ours.

Every route checks, in lmstfy's order: the names, the pool (from the token's "pool:"
prefix), then the token itself (except the two size routes, which are public); see
web/hot_routes.py (web/target.py for a Request). Then it parses its parameters, makes one
store call and shapes the answer (web/answers.py); errors are raised and rendered by
errors.py. The four hot routes (publish, consume, ACK, batch ACK) do their work in
web/hot_routes.py, which web/hot.py's dispatcher runs too when `lmstfy-py serve` serves this app.

A route pattern matches one number of path segments, so a queue literally named "peek" or
"size" is still published to and consumed from at /api/{ns}/peek, while /api/{ns}/{q}/peek
always peeks.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.admin.grants import CONSUME, MANAGE, PUBLISH, READ
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import (
    bulk_jobs,
    events,
    hot_routes,
    instrument,
    lifecycle,
    outcomes,
    params,
    schedules,
)
from lmstfy_py.web.answers import JSON, consumed_body, job_json, no_content, published, published_many
from lmstfy_py.web.hot_routes import PUBLIC, Target
from lmstfy_py.web.middleware import build_app, route
from lmstfy_py.web.target import call_of, defaults_of, job_id_of, target_of, throttle

# -- publish -----------------------------------------------------------------------


async def publish(request: Request) -> Response:
    return published(await hot_routes.publish(call_of(request)))


async def publish_bulk(request: Request) -> Response:
    """Beyond lmstfy, `job_id=ID1,ID2,...` names each job (one id per job, in order); the answer
    then lists under "duplicates" those that were not created. The body may also be SPEC 15's object
    form, each job with its own trace context and group (web/bulk_jobs.py)."""
    target = await target_of(request, PUBLISH)
    options = params.publish_options(request.query_params, defaults_of(request))
    jobs = bulk_jobs.bulk_jobs(await params.read_body(request), options, request.headers)
    async with throttle(request, target, "produce"):
        results = await target.store.publish_many(target.ns, target.queue, jobs)
    return published_many(results, ids_given=bool(options.job_ids))


async def republish(request: Request) -> Response:
    """ACKs job_id and publishes the body as a new job, in one atomic step (lmstfy: two)."""
    target = await target_of(request, PUBLISH | CONSUME)
    old_id = job_id_of(request)
    options = params.publish_options(request.query_params, defaults_of(request))
    body, headers = await params.read_body(request), request.headers
    job = options.job(body, params.attributes(headers), hot_routes.one_id(options), params.trace_from_headers(headers))
    return published(await target.store.publish(target.ns, target.queue, job, replaces=old_id))


# -- consume, ack, peek --------------------------------------------------------------


async def consume(request: Request) -> Response:
    """GET /api/{ns}/{q1}[,{q2}...] (web/hot_routes.py); GET /api/{ns}/events?queues=... is the merged
    event stream (web/events.py)."""
    if events.is_merged_stream(request.path_params["queue"], request.scope["query_string"]):
        return await events.namespace_events(request)
    jobs, count = await hot_routes.consume(call_of(request))
    return Response(consumed_body(jobs, count), media_type=JSON)  # JSONResponse's bytes and headers


async def ack(request: Request) -> Response:
    await hot_routes.ack(call_of(request))
    return no_content()  # whether or not the job still existed, as lmstfy


async def ack_many(request: Request) -> Response:
    await hot_routes.ack_many(call_of(request))
    return no_content()  # as the single ACK, whether or not the jobs still existed


async def peek_queue(request: Request) -> Response:
    target = await target_of(request, READ)
    return JSONResponse(job_json(await target.store.peek_queue(target.ns, target.queue), consumed=False))


async def peek_job(request: Request) -> Response:
    """lmstfy's job object, and beyond lmstfy its state, due time, attempts, priority, last error, and
    an ended job's record (web/outcomes.py)."""
    target = await target_of(request, READ)
    return await outcomes.look_up(target.store, target.ns, target.queue, job_id_of(request))


# -- queue ---------------------------------------------------------------------------


async def _label_if_known(request: Request, target: Target) -> None:
    """A public route names its namespace in metrics only when the queue exists: anyone may call it."""
    if await target.store.queue_exists(target.ns, target.queue):
        setattr(request.state, instrument.LABELLED_NAMESPACE, target.ns)


async def size(request: Request) -> Response:
    target = await target_of(request, PUBLIC)
    queue_size = await target.store.size(target.ns, target.queue)
    await _label_if_known(request, target)
    return JSONResponse({"namespace": target.ns, "queue": target.queue, "size": queue_size})


async def destroy(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    await target.store.destroy(target.ns, target.queue)
    return no_content()


# -- dead letter ---------------------------------------------------------------------


async def peek_dead_letter(request: Request) -> Response:
    target = await target_of(request, READ)
    dead = await target.store.dead_letter(target.ns, target.queue)
    return JSONResponse(
        {"namespace": target.ns, "queue": target.queue, "deadletter_size": dead.size, "deadletter_head": dead.head}
    )


async def respawn_dead_letter(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    limit = params.limit(request.query_params)
    ttl = params.seconds(request.query_params, "ttl", defaults_of(request).ttl)
    count = await target.store.respawn(target.ns, target.queue, limit, ttl * 1000)
    return JSONResponse({"msg": "respawned", "count": count})


async def delete_dead_letter(request: Request) -> Response:
    target = await target_of(request, MANAGE)
    await target.store.delete_dead(target.ns, target.queue, params.limit(request.query_params))
    return no_content()


async def dead_letter_size(request: Request) -> Response:
    target = await target_of(request, PUBLIC)
    dead_size = await target.store.dead_letter_size(target.ns, target.queue)
    await _label_if_known(request, target)
    return JSONResponse({"namespace": target.ns, "queue": target.queue, "size": dead_size})


QUEUE = "/api/{ns}/{queue}"
# The router tries the routes of a method in this order: the job routes every worker calls all
# day first. A two-segment pattern never matches a longer path, so the order changes nothing else.
ROUTES = [
    route(QUEUE, "PUT", publish),
    route(QUEUE, "GET", consume),
    route(QUEUE + "/job/{job_id}", "DELETE", ack),
    route(QUEUE + "/jobs", "DELETE", ack_many),
    route(QUEUE + "/bulk", "PUT", publish_bulk),
    route(QUEUE + "/job/{job_id}", "PUT", republish),
    route(QUEUE + "/peek", "GET", peek_queue),
    route(QUEUE + "/size", "GET", size),
    route(QUEUE + "/job/{job_id}", "GET", peek_job),
    route(QUEUE + "/deadletter", "GET", peek_dead_letter),
    route(QUEUE + "/deadletter", "PUT", respawn_dead_letter),
    route(QUEUE + "/deadletter", "DELETE", delete_dead_letter),
    route(QUEUE + "/deadletter/size", "GET", dead_letter_size),
    route(QUEUE, "DELETE", destroy),
    *lifecycle.ROUTES,
    *outcomes.ROUTES,
    *events.ROUTES,
    *schedules.ROUTES,
]


def create_data_app(runtime: Runtime) -> Starlette:
    app = build_app(runtime, ROUTES, body_timeout=runtime.config.server.body_timeout)
    app.state.name = "data"  # the `app` label of its metrics (web/instrument.py)
    return app
