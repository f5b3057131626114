"""What every data-plane route reads from its request before its engine call: the checked names,
pool and token (a Target), the job id of the path, and a throttle permit.

Every route checks, in lmstfy's order: the names, the pool (from the token's "pool:" prefix),
then the token itself (except the public size routes), and then (SPEC 15) whether the token's
grant covers the route's scope and queue: before any parameter is read or throttle unit taken.
Each route names its scope (admin/grants.py's bits; PUBLIC for the size routes).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, cast

from starlette.requests import Request

from lmstfy_py import ids
from lmstfy_py.admin.limits import LimitStore, Permit
from lmstfy_py.admin.tokens import UNKNOWN
from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter, OutOfScope, Unauthorized
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


# A route's scope: admin/grants.py's bits (several: all needed), or PUBLIC for a route without a token.
Scope = int | None
PUBLIC: Scope = None


async def authorize(request: Request, ns: str, queue: str, scope: Scope) -> Target:
    state: dict[str, Any] = request.scope.setdefault("state", {})  # what request.state sets
    return await check_token(runtime_of(request), state, ns, queue, params.request_token(request), scope)


async def check_token(
    runtime: Runtime, state: dict[str, Any], ns: str, queue: str, raw_token: str, scope: Scope
) -> Target:
    """The pool of `raw_token` ("[pool:]token") and, unless the route is PUBLIC, the token itself and
    whether its grant covers `scope` on `queue` ("q1,q2": on each).

    `state` is the request's ASGI state: it gets the pool and, once the token is checked, the
    namespace, the labels of the metrics and the fields of the logs (web/instrument.py, logs.py).
    """
    pool, token = params.split_token(raw_token)
    store = runtime.pools.get(pool)
    state["pool"] = pool  # the metrics' pool label (web/instrument.py), without parsing again
    # -sv (development only): lmstfy's dev mode takes any request, valid token or none.
    if scope is not None and not runtime.config.server.skip_token_check:
        if not token:
            raise Unauthorized("token not found")
        grant = runtime.tokens.cached_grant(pool, ns, token)
        if grant is UNKNOWN:
            grant = await runtime.tokens.grant(pool, ns, token)
        if grant is None:
            raise Unauthorized("invalid token")
        state[instrument.LABELLED_NAMESPACE] = ns
        # One attribute for lmstfy's tokens and every other without scopes: the hot routes' whole cost.
        if not grant.unrestricted and not grant.allows(scope, queue):
            raise OutOfScope()
    return Target(store, pool, ns, queue, token)


async def target_of(request: Request, scope: Scope) -> Target:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return await authorize(request, ns, queue, scope)


def job_id_of(request: Request) -> str:
    """The job id of the path: one of ours, or one a business chose."""
    return checked_job_id(request.path_params["job_id"])


def checked_job_id(job_id: str) -> str:
    if not ids.is_acceptable(job_id):
        raise InvalidParameter("invalid job id")
    return job_id


def throttle(request: Request, target: Target, action: Action) -> Throttle:
    return Throttle(runtime_of(request).limits, target, action)


class Throttle:
    """Takes a unit of the token's limit around the engine call of a publish, bulk publish or consume.

    Entered after every check, so a request that fails them never counts against a limit; one
    whose engine call fails (an error, or no job to consume) gives its unit back, as lmstfy's.
    Over the limit: 429. A token without a limit costs no Redis call here. A class rather than an
    asynccontextmanager: its generator cost every publish and consume a few µs.
    """

    __slots__ = ("action", "limits", "permit", "target")

    def __init__(self, limits: LimitStore, target: Target, action: Action) -> None:
        self.limits, self.target, self.action = limits, target, action
        self.permit: Permit | None = None

    async def __aenter__(self) -> None:
        target = self.target
        if self.limits.cached(target.pool, target.ns, target.token) is not None:  # else no coroutine of take()
            self.permit = await self.limits.take(target.pool, target.ns, target.token, self.action)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None and self.permit is not None:
            await self.limits.give_back(self.permit)
