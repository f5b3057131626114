"""What every data-plane route reads from its request before its engine call: the checked names,
pool and token (a Target), the job id of the path, and a throttle permit.

Every route checks, in lmstfy's order: the names, the pool (from the token's "pool:" prefix),
then the token itself (except the public size routes).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, cast

from starlette.requests import Request

from lmstfy_py import ids
from lmstfy_py.admin.limits import LimitStore, Permit
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
    state: dict[str, Any] = request.scope.setdefault("state", {})  # what request.state sets
    return await check_token(runtime_of(request), state, ns, queue, params.request_token(request), need_token)


async def check_token(
    runtime: Runtime, state: dict[str, Any], ns: str, queue: str, raw_token: str, need_token: bool = True
) -> Target:
    """The pool of `raw_token` ("[pool:]token") and, unless `need_token` is False, the token itself.

    `state` is the request's ASGI state: it gets the pool and, once the token is checked, the
    namespace, the labels of the metrics and the fields of the logs (web/instrument.py, logs.py).
    """
    pool, token = params.split_token(raw_token)
    store = runtime.pools.get(pool)
    state["pool"] = pool  # the metrics' pool label (web/instrument.py), without parsing again
    # -sv (development only): lmstfy's dev mode takes any request, valid token or none.
    if need_token and not runtime.config.server.skip_token_check:
        if not token:
            raise Unauthorized("token not found")
        if not await runtime.tokens.exists(pool, ns, token):
            raise Unauthorized("invalid token")
        state[instrument.LABELLED_NAMESPACE] = ns
    return Target(store, pool, ns, queue, token)


async def target_of(request: Request, need_token: bool = True) -> Target:
    ns, queue = request.path_params["ns"], request.path_params["queue"]
    params.check_names(ns, queue)
    return await authorize(request, ns, queue, need_token)


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
        self.permit = await self.limits.take(target.pool, target.ns, target.token, self.action)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None and self.permit is not None:
            await self.limits.give_back(self.permit)
