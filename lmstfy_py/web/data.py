"""The data-plane app (default port 7777): lmstfy's /api routes.

Every route checks, in lmstfy's order: the names, the pool (from the token's "pool:"
prefix), then the token itself (except the two size routes, which are public). Then it
parses its parameters, makes one engine call and shapes the answer; errors are raised and
rendered by errors.py.

A route pattern matches one number of path segments, so a queue literally named "peek" or
"size" is still published to and consumed from at /api/{ns}/peek, while /api/{ns}/{q}/peek
always peeks.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py import ids
from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter, NoJobAvailable, Unauthorized
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.engine import Engine
from lmstfy_py.types import Job
from lmstfy_py.web import instrument, params
from lmstfy_py.web.middleware import build_app, route

Action = Literal["produce", "consume"]


@dataclass(frozen=True, slots=True)
class Target:
    """What an /api request is about, once its names, pool and token are checked."""

    engine: Engine
    pool: str
    ns: str
    queue: str
    token: str


def _runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def _defaults(request: Request) -> Defaults:
    return _runtime(request).config.defaults


async def _authorize(request: Request, ns: str, queue: str, need_token: bool = True) -> Target:
    runtime = _runtime(request)
    pool, token = params.split_token(params.request_token(request))
    engine = runtime.pools.get(pool)
    request.state.pool = pool  # the metrics' pool label (web/instrument.py), without parsing again
    if need_token:
        if not token:
            raise Unauthorized("token not found")
        if not await runtime.tokens.exists(pool, ns, token):
            raise Unauthorized("invalid token")
        setattr(request.state, instrument.LABELLED_NAMESPACE, ns)
    return Target(engine, pool, ns, queue, token)


async def _target(request: Request, need_token: bool = True) -> Target:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return await _authorize(request, ns, queue, need_token)


def _job_id(request: Request) -> str:
    job_id: str = request.path_params["job_id"]
    if not ids.is_valid(job_id):
        raise InvalidParameter("invalid job id")
    return job_id


@asynccontextmanager
async def throttle(request: Request, target: Target, action: Action) -> AsyncIterator[None]:
    """Takes a unit of the token's limit around the engine call of a publish, bulk publish or consume.

    Entered after every check, so a request that fails them never counts against a limit; one
    whose engine call fails (an error, or no job to consume) gives its unit back, as lmstfy's.
    Over the limit: 429. A token without a limit costs no Redis call here.
    """
    limits = _runtime(request).limits
    permit = await limits.take(target.pool, target.ns, target.token, action)
    try:
        yield
    except BaseException:
        if permit is not None:
            await limits.give_back(permit)
        raise


def job_json(job: Job, consumed: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {"msg": "new job"} if consumed else {}
    shown.update(
        namespace=job.namespace,
        queue=job.queue,
        job_id=job.job_id,
        data=base64.b64encode(job.body).decode("ascii"),
        ttl=job.ttl,
        elapsed_ms=job.elapsed_ms,
        remain_tries=job.remain_tries,
        # lmstfy answers null for a versioned job published without any attribute.
        attributes=job.attributes or None,
    )
    return shown


def _published(job_id: str) -> Response:
    return JSONResponse({"msg": "published", "job_id": job_id}, status_code=201)


def _no_content() -> Response:
    return Response(status_code=204)


# -- publish -----------------------------------------------------------------------


async def publish(request: Request) -> Response:
    target = await _target(request)
    options = params.publish_options(request.query_params, _defaults(request))
    job = options.job(await params.read_body(request), params.attributes(request.headers))
    async with throttle(request, target, "produce"):
        job_id = await target.engine.publish(target.ns, target.queue, job)
    return _published(job_id)


async def publish_bulk(request: Request) -> Response:
    target = await _target(request)
    options = params.publish_options(request.query_params, _defaults(request))
    bodies = params.bulk_bodies(await params.read_body(request))
    attributes = params.attributes(request.headers)
    jobs = [options.job(body, attributes) for body in bodies]
    async with throttle(request, target, "produce"):
        job_ids = await target.engine.publish_many(target.ns, target.queue, jobs)
    return JSONResponse({"msg": "published", "job_ids": job_ids}, status_code=201)


async def republish(request: Request) -> Response:
    """ACKs job_id and publishes the body as a new job, in one atomic step (lmstfy: two)."""
    target = await _target(request)
    old_id = _job_id(request)
    options = params.publish_options(request.query_params, _defaults(request))
    job = options.job(await params.read_body(request), params.attributes(request.headers))
    return _published(await target.engine.publish(target.ns, target.queue, job, replaces=old_id))


# -- consume, ack, peek --------------------------------------------------------------


async def consume(request: Request) -> Response:
    """GET /api/{ns}/{q1}[,{q2}...]: the queues listed first win.

    Unlike lmstfy, several queues may be consumed without a timeout, and count > 1 works
    with several queues too.
    """
    ns = request.path_params["ns"]
    queues = params.queue_list(ns, request.path_params["queue"])
    target = await _authorize(request, ns, ",".join(queues))
    options = params.consume_options(request.query_params, _defaults(request))
    if not queues:
        raise InvalidParameter("invalid queue name(s)")
    async with throttle(request, target, "consume"):
        jobs = await target.engine.consume(ns, queues, options.ttr_ms, options.timeout_ms, options.count)
        if not jobs:
            raise NoJobAvailable()
    if options.count == 1:
        return JSONResponse(job_json(jobs[0], consumed=True))
    return JSONResponse([job_json(job, consumed=True) for job in jobs])


async def ack(request: Request) -> Response:
    target = await _target(request)
    await target.engine.ack(target.ns, target.queue, _job_id(request))
    return _no_content()  # whether or not the job still existed, as lmstfy


async def ack_many(request: Request) -> Response:
    """Beyond lmstfy: DELETE .../jobs?job_id=ID1,ID2&job_id=ID3 ACKs up to 100 jobs in one Lua call."""
    target = await _target(request)
    await target.engine.ack_many(target.ns, target.queue, params.job_ids(request.query_params))
    return _no_content()  # as the single ACK, whether or not the jobs still existed


async def peek_queue(request: Request) -> Response:
    target = await _target(request)
    return JSONResponse(job_json(await target.engine.peek_queue(target.ns, target.queue), consumed=False))


async def peek_job(request: Request) -> Response:
    target = await _target(request)
    job = await target.engine.peek_job(target.ns, target.queue, _job_id(request))
    return JSONResponse(job_json(job, consumed=False))


# -- queue ---------------------------------------------------------------------------


async def _label_if_known(request: Request, target: Target) -> None:
    """A public route names its namespace in metrics only when the queue exists: anyone may call it."""
    if await target.engine.queue_exists(target.ns, target.queue):
        setattr(request.state, instrument.LABELLED_NAMESPACE, target.ns)


async def size(request: Request) -> Response:
    target = await _target(request, need_token=False)
    queue_size = await target.engine.size(target.ns, target.queue)
    await _label_if_known(request, target)
    return JSONResponse({"namespace": target.ns, "queue": target.queue, "size": queue_size})


async def destroy(request: Request) -> Response:
    target = await _target(request)
    await target.engine.destroy(target.ns, target.queue)
    return _no_content()


# -- dead letter ---------------------------------------------------------------------


async def peek_dead_letter(request: Request) -> Response:
    target = await _target(request)
    dead = await target.engine.dead_letter(target.ns, target.queue)
    return JSONResponse(
        {"namespace": target.ns, "queue": target.queue, "deadletter_size": dead.size, "deadletter_head": dead.head}
    )


async def respawn_dead_letter(request: Request) -> Response:
    target = await _target(request)
    limit = params.limit(request.query_params)
    ttl = params.seconds(request.query_params, "ttl", _defaults(request).ttl)
    count = await target.engine.respawn(target.ns, target.queue, limit, ttl * 1000)
    return JSONResponse({"msg": "respawned", "count": count})


async def delete_dead_letter(request: Request) -> Response:
    target = await _target(request)
    await target.engine.bury(target.ns, target.queue, params.limit(request.query_params))
    return _no_content()


async def dead_letter_size(request: Request) -> Response:
    target = await _target(request, need_token=False)
    dead_size = await target.engine.dead_letter_size(target.ns, target.queue)
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
]


def create_data_app(runtime: Runtime) -> Starlette:
    app = build_app(runtime, ROUTES, body_timeout=runtime.config.server.body_timeout)
    app.state.name = "data"  # the `app` label of its metrics (web/instrument.py)
    return app
