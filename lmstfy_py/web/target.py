"""What every data-plane route reads from its request before its engine call: the checked names,
pool and token (a Target), the job id of the path, and a throttle permit.

Every route checks, in lmstfy's order: the names, the pool (from the token's "pool:" prefix),
then the token itself (except the public size routes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, cast

from starlette.requests import Request

from lmstfy_py import ids
from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter, Unauthorized
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import instrument, params

Action = Literal["produce", "consume"]


@dataclass(frozen=True, slots=True)
class Target:
    """What an /api request is about, once its names, pool and token are checked."""

    store: JobStore
    pool: str
    ns: str
    queue: str
    token: str


def runtime_of(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def defaults_of(request: Request) -> Defaults:
    return runtime_of(request).config.defaults


async def authorize(request: Request, ns: str, queue: str, need_token: bool = True) -> Target:
    runtime = runtime_of(request)
    pool, token = params.split_token(params.request_token(request))
    store = runtime.pools.get(pool)
    request.state.pool = pool  # the metrics' pool label (web/instrument.py), without parsing again
    # -sv (development only): lmstfy's dev mode takes any request, valid token or none.
    if need_token and not runtime.config.server.skip_token_check:
        if not token:
            raise Unauthorized("token not found")
        if not await runtime.tokens.exists(pool, ns, token):
            raise Unauthorized("invalid token")
        setattr(request.state, instrument.LABELLED_NAMESPACE, ns)
    return Target(store, pool, ns, queue, token)


async def target_of(request: Request, need_token: bool = True) -> Target:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return await authorize(request, ns, queue, need_token)


def job_id_of(request: Request) -> str:
    """The job id of the path: one of ours, or one a business chose."""
    job_id: str = request.path_params["job_id"]
    if not ids.is_acceptable(job_id):
        raise InvalidParameter("invalid job id")
    return job_id


@asynccontextmanager
async def throttle(request: Request, target: Target, action: Action) -> AsyncIterator[None]:
    """Takes a unit of the token's limit around the engine call of a publish, bulk publish or consume.

    Entered after every check, so a request that fails them never counts against a limit; one
    whose engine call fails (an error, or no job to consume) gives its unit back, as lmstfy's.
    Over the limit: 429. A token without a limit costs no Redis call here.
    """
    limits = runtime_of(request).limits
    permit = await limits.take(target.pool, target.ns, target.token, action)
    try:
        yield
    except BaseException:
        if permit is not None:
            await limits.give_back(permit)
        raise
