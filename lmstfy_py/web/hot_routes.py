"""The data routes' shared work on plain values, and the four hot routes' whole work.

Every data route checks, in lmstfy's order: the names, the pool (from the token's "pool:" prefix),
then the token itself (except the public size routes), and then (SPEC 15) whether the token's
grant covers the route's scope and queue: before any parameter is read or throttle unit taken.
Each route names its scope (admin/grants.py's bits; PUBLIC for the size routes). `check_token`
makes those checks and answers a `Target`; `Throttle` takes a unit of the token's limit around
the engine call. web/target.py applies them to a Starlette Request for the other routes.

Publish, consume, ACK and batch ACK are answered by data.py's handlers when the data app routes
a request (tests, embedding callers) and by hot.py's dispatcher when `lmstfy-py serve` does;
both hand their request here as a `Call` and shape the result with web/answers.py, so the
checks, their order (names, pool, token, its scope, parameters, body, throttle), the store call and the
errors are one code. A Call holds only what these routes read, none of Starlette's per-request
objects: that is most of what the dispatcher saves (docs/PERFORMANCE.md, issue 27).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar, cast
from urllib.parse import parse_qsl

from starlette.datastructures import Headers, QueryParams

from lmstfy_py import ids
from lmstfy_py.admin.grants import CONSUME, PUBLISH
from lmstfy_py.admin.limits import LimitStore, Permit
from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter, NoJobAvailable, OutOfScope, Unauthorized
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import Job, Published
from lmstfy_py.web import ack_params, instrument, params

T = TypeVar("T")


class Query(QueryParams):
    """The query string as Starlette's QueryParams parses it, with `getlist` a dict lookup:
    web/params.py asks a publish's query for up to 13 names, and QueryParams scans its whole list
    for each."""

    def __init__(self, raw: bytes) -> None:  # QueryParams' own set-up would parse it a second way
        items = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
        self._list = items
        self._dict = dict(items)  # the last of repeated values, as QueryParams' get()
        self._lists: dict[str, list[str]] = {}
        for key, value in items:
            self._lists.setdefault(key, []).append(value)
        self.options: dict[object, tuple[Defaults, Any]] = {}  # options_of's: parser -> (defaults, options)

    def getlist(self, key: Any) -> list[str]:
        # Not a copy, unlike QueryParams': web/params.py only reads what it is given.
        return self._lists.get(key) or []


class FirstHeaders(Headers):
    """Starlette's Headers of an ASGI scope's raw list, with `get` a dict lookup: a hot route asks
    for three headers, and Headers lower-cases, encodes and scans the list for each."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._list = raw
        self._first: dict[bytes, bytes] = {}
        for name, value in raw:  # ASGI servers hand the names lower-cased
            self._first.setdefault(name, value)

    def get(self, key: str, default: Any = None) -> Any:
        value = self._first.get(key.lower().encode("latin-1"))
        return default if value is None else value.decode("latin-1")  # the first of repeats, as Headers


# A client sends the same query string again and again (its token, delay, ttl, tries; its ttr and
# timeout): it is parsed once, and so are the options read from it (options_of). Parsing a
# publish's was ~6 % of its server CPU. Kept only for strings a client repeats, and bounded (the
# parse runs before the token is checked, so anyone can send new strings): none over KEPT_LENGTH
# bytes or KEPT_PARAMS parameters, none naming ids (a publish's `job_id`, a batch ACK's, a
# consume's `ack`: new in each request), and past QUERIES_KEPT strings the table starts again.
# At most ~2 MB a process. Shared Queries are only read.
QUERIES_KEPT = 256
KEPT_LENGTH = 512
KEPT_PARAMS = 16
_PER_REQUEST = ("job_id", "ack")
_queries: dict[bytes, Query] = {}


def shared_query(raw: bytes) -> Query:
    query = _queries.get(raw)
    if query is not None:
        return query
    query = Query(raw)
    if len(raw) <= KEPT_LENGTH and len(query._list) <= KEPT_PARAMS and not any(k in query._dict for k in _PER_REQUEST):
        if len(_queries) >= QUERIES_KEPT:
            _queries.clear()
        _queries[raw] = query
    return query


def options_of(query: Query, parse: Callable[[QueryParams, Defaults], T], defaults: Defaults) -> T:
    """parse(query, defaults), once per query string and defaults (a parser is a pure function of
    both; its options are frozen). A query it refuses is parsed, and refused, each time."""
    found = query.options.get(parse)
    if found is None or found[0] is not defaults:  # `is`: defaults held here cannot be mistaken by id
        found = query.options[parse] = (defaults, parse(query, defaults))
    return cast(T, found[1])


@dataclass(slots=True)
class Call:
    """What a hot route reads of its request."""

    runtime: Runtime
    state: dict[str, Any]  # the ASGI scope's: the pool and the namespace for metrics and logs
    ns: str
    queue: str  # "q1,q2,..." for a consume
    query: Query  # shared_query's: both ways in build it
    headers: Headers
    read_body: Callable[[], Awaitable[bytes]]
    job_id: str = ""  # an ACK's, from its path

    @property
    def token(self) -> str:
        return self.headers.get("x-token") or params._first(self.query, "token") or ""


# -- what every data route checks before its engine call (web/target.py: the same for a Request) --

Action = Literal["produce", "consume"]


@dataclass(frozen=True, slots=True)
class Target:
    """What an /api request is about, once its names, pool and token are checked."""

    store: JobStore
    pool: str
    ns: str
    queue: str
    token: str


# A route's scope: admin/grants.py's bits (several: all needed), or PUBLIC for a route without a token.
Scope = int | None
PUBLIC: Scope = None


async def check_token(
    runtime: Runtime, state: dict[str, Any], ns: str, queue: str, raw_token: str, scope: Scope
) -> Target:
    """The pool of `raw_token` ("[pool:]token") and, unless the route is PUBLIC, the token itself and
    whether its grant covers `scope` on `queue` ("q1,q2": on each).

    `state` is the request's ASGI state: it gets the pool and, once the token is checked, the
    namespace, the labels of the metrics and the fields of the logs (web/instrument.py, logs.py).
    """
    pool, token = params.split_token(raw_token)
    store = runtime.pools.served[pool]  # a pool not served raises NotFound (store/pools.py)
    state["pool"] = pool  # the metrics' pool label (web/instrument.py), without parsing again
    # -sv (development only): lmstfy's dev mode takes any request, valid token or none.
    if scope is not None and not runtime.config.server.skip_token_check:
        if not token:
            raise Unauthorized("token not found")
        # TokenStore.grant's cache read inline: every data request makes it, and the call cost more.
        cached = runtime.tokens.cache.get((pool, ns, token))
        grant = cached[0] if cached and cached[1] > time.monotonic() else await runtime.tokens.grant(pool, ns, token)
        if grant is None:
            raise Unauthorized("invalid token")
        state[instrument.LABELLED_NAMESPACE] = ns
        # One attribute for lmstfy's tokens and every other without scopes: the hot routes' whole cost.
        if not grant.unrestricted and not grant.allows(scope, queue):
            raise OutOfScope()
    return Target(store, pool, ns, queue, token)


def checked_job_id(job_id: str) -> str:
    if not ids.is_acceptable(job_id):
        raise InvalidParameter("invalid job id")
    return job_id


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
        if (target.pool, target.ns, target.token) in self.limits.table:  # else no coroutine of take()
            self.permit = await self.limits.take(target.pool, target.ns, target.token, self.action)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None and self.permit is not None:
            await self.limits.give_back(self.permit)


# Names that passed the checks (a pure function of the strings), so a client's next request with
# them costs one lookup, not four regular expressions and encodings. Checked before the token, so
# anyone can send new names: bounded like the query table. A namespace and queue are at most 255
# bytes each (~2.5 MB for NAMES_KEPT pairs); a consume's list is kept only up to LISTED_KEPT queues
# and KEPT_LENGTH characters (~1.5 MB for LISTS_KEPT), as a list may be as long as a request head.
NAMES_KEPT = 4096
LISTS_KEPT = 1024
LISTED_KEPT = 8
_checked_names: set[tuple[str, str]] = set()
_queue_lists: dict[tuple[str, str], list[str]] = {}


def _check_names(ns: str, queue: str) -> None:
    if (ns, queue) not in _checked_names:
        params.check_names(ns, queue)  # raises for bad names: those are never kept
        if len(_checked_names) >= NAMES_KEPT:
            _checked_names.clear()
        _checked_names.add((ns, queue))


def _queue_list(ns: str, queues: str) -> list[str]:
    found = _queue_lists.get((ns, queues))
    if found is None:
        found = params.queue_list(ns, queues)
        # An empty list is refused by the caller: not kept.
        if found and len(found) <= LISTED_KEPT and len(queues) <= KEPT_LENGTH:
            if len(_queue_lists) >= LISTS_KEPT:
                _queue_lists.clear()
            _queue_lists[ns, queues] = found
    return list(found)  # the caller's own: the kept one stays as checked


async def _target(call: Call, scope: int) -> Target:
    _check_names(call.ns, call.queue)
    return await check_token(call.runtime, call.state, call.ns, call.queue, call.token, scope)


def one_id(options: params.PublishOptions) -> str | None:
    if len(options.job_ids) > 1:
        raise InvalidParameter("a job_id list is for a bulk publish: one job, one id")
    return options.job_ids[0] if options.job_ids else None


async def publish(call: Call) -> Published:
    target = await _target(call, PUBLISH)
    options = options_of(call.query, params.publish_options, call.runtime.config.defaults)
    trace = params.trace_from_headers(call.headers)
    job = options.job(await call.read_body(), params.attributes(call.headers), one_id(options), trace)
    async with Throttle(call.runtime.limits, target, "produce"):
        return await target.store.publish(target.ns, target.queue, job)


async def consume(call: Call) -> tuple[list[Job], int]:
    """GET /api/{ns}/{q1}[,{q2}...]: the jobs (the queues listed first win), and the count asked.

    Unlike lmstfy, several queues may be consumed without a timeout, and count > 1 works
    with several queues too. Beyond lmstfy, `ack=QUEUE:ID,...` ACKs jobs of any queue of the
    namespace first, as the batch ACK would: a worker's ACKs ride on its next consume. They stay
    ACKed whatever the consume then answers; a refused request (400, 429) ACKs nothing.
    """
    queues = _queue_list(call.ns, call.queue)
    if not queues:  # a name error (400) comes before the token's (SPEC 15's order)
        raise InvalidParameter("invalid queue name(s)")
    target = await check_token(call.runtime, call.state, call.ns, ",".join(queues), call.token, CONSUME)
    options = options_of(call.query, params.consume_options, call.runtime.config.defaults)
    acks = ack_params.consume_acks(call.query)
    if acks:  # an ACK needs consume on its own queue, which may be one not consumed (SPEC 15)
        await check_token(call.runtime, call.state, call.ns, ",".join(acks), call.token, CONSUME)
    async with Throttle(call.runtime.limits, target, "consume"):
        jobs = await target.store.consume(call.ns, queues, options.ttr_ms, options.timeout_ms, options.count, acks=acks)
        if not jobs:
            raise NoJobAvailable()
    return jobs, options.count


async def ack(call: Call) -> None:
    target = await _target(call, CONSUME)
    await target.store.ack(target.ns, target.queue, checked_job_id(call.job_id))


async def ack_many(call: Call) -> None:
    """Beyond lmstfy: DELETE .../jobs?job_id=ID1,ID2&job_id=ID3 ACKs up to 100 jobs in one Lua call."""
    target = await _target(call, CONSUME)
    await target.store.ack_many(target.ns, target.queue, ack_params.job_ids(call.query))
