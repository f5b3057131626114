"""Recording: the calls the web layer and the engine make to count what happened.

Every call is cheap (a cached child, no label validation, counts kept in the process and written
about once a second: metrics/pending.py) and never raises: a metric that cannot be written must
not fail the job operation it counts.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec

from lmstfy_py import ids
from lmstfy_py.metrics import pending
from lmstfy_py.metrics.families import (
    CONSUME_JOBS,
    CONSUME_MULTI_JOBS,
    CONSUME_QUEUE_JOBS,
    DEADLETTER_RESPAWN_JOBS,
    HTTP_CODES,
    HTTP_LATENCY_MS,
    HTTP_SECONDS,
    JOB_ACK_ELAPSED_MS,
    JOB_ELAPSED_MS,
    OTLP_SPANS_DROPPED,
    PUBLISH_QUEUE_JOBS,
    PUSH_CONSUME_MS,
    PUSH_DELIVERIES,
    PUSH_HTTP_CODES,
    PUSH_LATENCY_MS,
    QUEUE_DIRECT_PUSH_JOBS,
    RATE_LIMIT,
    TIMER_ADD_JOBS,
    TIMER_DUE_JOBS,
)
from lmstfy_py.metrics.multiproc import directory
from lmstfy_py.store.engine import EngineObserver, PumpResult
from lmstfy_py.types import Job, NewJob

log = logging.getLogger(__name__)
P = ParamSpec("P")


# Each series is a file entry in every process that made it and a line in every scrape: names
# clients choose are only labels once the request was authenticated (web/instrument.py), and
# past this many series a family lumps new ones together under OVERFLOW.
MAX_SERIES_PER_FAMILY = 10_000
OVERFLOW = "(overflow)"  # never a valid namespace, queue or token
CLIENT_CHOSEN = frozenset({"namespace", "queue", "token"})

_children: dict[tuple[int, tuple[str, ...]], Any] = {}
_made: Counter[int] = Counter()  # id(family) -> series made in this process


def labels_for(family: Any, labels: tuple[str, ...]) -> tuple[str, ...]:
    """`labels`, or, once the family has MAX_SERIES_PER_FAMILY series in this process, the same with
    every name a client chose (namespace, queue, token) replaced by OVERFLOW."""
    if (id(family), labels) in _children or _made[id(family)] < MAX_SERIES_PER_FAMILY:
        return labels
    names = family._labelnames
    return tuple(OVERFLOW if name in CLIENT_CHOSEN else value for name, value in zip(names, labels, strict=True))


def series(family: Any, *labels: str) -> Any:
    """family.labels(*labels) within the family's cap, minus prometheus-client's validation and lock
    on every call: this runs per request. Counters and histograms come buffered (pending.py)."""
    key = (id(family), labels)
    child = _children.get(key)
    if child is None:
        key = (id(family), labels_for(family, labels))
        child = _children.get(key)
        if child is None:
            directory()  # before the child: one made first would write where no scrape reads
            child = _children[key] = pending.buffered(family, family.labels(*key[1]))
            _made[id(family)] += 1
    return child


def token_label(token: str) -> str:
    """What a metric says of a token: the first 12 hex digits of its SHA-256, never the token
    (docs/API.md): enough to tell tokens apart and to match one you hold, useless to use one."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def _never_raises(record: Callable[P, None]) -> Callable[P, None]:
    """A metric that cannot be written (a full disk) must not fail the job operation it counts:
    a publish answered 503 after it succeeded would be published twice by a retrying client."""

    @functools.wraps(record)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            record(*args, **kwargs)
        except Exception:
            log.exception("metrics: %s failed", record.__name__)

    return quiet


# -- what the web layer reports ------------------------------------------------------------


class RequestSeries:
    """The series one kind of answered request counts in: lmstfy-py's by app, method, route template
    and status, and on the data port lmstfy's own HTTP families (`lmstfy`: pool, namespace, gin api);
    like lmstfy, latency only of 2xx answers. web/instrument.py keeps one per kind of request, so an
    answer costs three buffered steps, not three label lookups."""

    __slots__ = ("codes", "latency_ms", "seconds")

    def __init__(self, app: str, method: str, route: str, status: int, lmstfy: tuple[str, str, str] | None) -> None:
        self.seconds = series(HTTP_SECONDS, app, method, route, str(status))
        self.codes = self.latency_ms = None
        if lmstfy is not None:
            pool, ns, api = lmstfy
            self.codes = series(HTTP_CODES, pool, ns, api, method, str(status))
            if status < 300:
                self.latency_ms = series(HTTP_LATENCY_MS, pool, ns, api, method)

    def observe(self, seconds: float) -> None:
        self.seconds.observe(seconds)
        if self.codes is not None:
            self.codes.inc()
        if self.latency_ms is not None:
            self.latency_ms.observe(seconds * 1000)


def request_series(
    app: str, method: str, route: str, status: int, lmstfy: tuple[str, str, str] | None
) -> RequestSeries | None:
    """RequestSeries(...), or None (logged) when its series cannot be made (a full disk)."""
    try:
        return RequestSeries(app, method, route, status, lmstfy)
    except Exception:
        log.exception("metrics: the series of a request could not be made")
        return None


@_never_raises
def rate_limit_hit(pool: str, ns: str, token: str, action: str) -> None:
    """A publish ("produce") or consume ("consume") refused with 429 by the token's limit."""
    series(RATE_LIMIT, pool, ns, token_label(token), action).inc()


# -- what the pushers report ---------------------------------------------------------------


@_never_raises
def pushed(pool: str, ns: str, group: str, queue: str, outcome: str, seconds: float) -> None:
    """One delivery of a push group: `outcome` an HTTP status, "timeout" or "unreachable"."""
    series(PUSH_LATENCY_MS, pool, ns, queue).observe(seconds * 1000)
    series(PUSH_HTTP_CODES, pool, ns, queue, outcome if outcome.isdigit() else "0").inc()
    series(PUSH_DELIVERIES, pool, ns, group, outcome).inc()


@_never_raises
def push_consumed(pool: str, ns: str, queue: str, seconds: float) -> None:
    """A push group's consume that got jobs, as lmstfy times it (for each queue it took from)."""
    series(PUSH_CONSUME_MS, pool, ns, queue).observe(seconds * 1000)


@_never_raises
def otlp_spans_dropped(reason: str, count: int) -> None:
    """Spans the OTLP export lost (tracing/): "queue_full" or "export_failed". On the event loop's
    thread only, like every buffered count (the export's thread hands its counts over to it)."""
    series(OTLP_SPANS_DROPPED, reason).inc(count)


# -- what the engine reports ---------------------------------------------------------------


class EngineMetrics(EngineObserver):
    """Counts job operations in the engine, so they are counted whatever the caller."""

    @_never_raises
    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        delayed = sum(1 for job in jobs if job.delay_ms > 0)
        series(PUBLISH_QUEUE_JOBS, pool, ns, queue).inc(len(jobs))
        if delayed:
            series(TIMER_ADD_JOBS, pool).inc(delayed)
        if delayed < len(jobs):
            series(QUEUE_DIRECT_PUSH_JOBS, pool).inc(len(jobs) - delayed)
        if replaces:  # lmstfy re-publishes with a DELETE then a publish
            self.acked(pool, ns, queue, replaces)

    @_never_raises
    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        # lmstfy's handler takes its multi-queue path for several queues or count > 1.
        series(CONSUME_MULTI_JOBS if len(queues) > 1 or count > 1 else CONSUME_JOBS, pool).inc(len(jobs))
        for job in jobs:
            series(CONSUME_QUEUE_JOBS, pool, ns, job.queue).inc()
            series(JOB_ELAPSED_MS, pool, ns, job.queue).observe(job.elapsed_ms)

    @_never_raises
    def acked(self, pool: str, ns: str, queue: str, job_id: str) -> None:
        # As lmstfy: every ACK counts, whether or not the job still existed, and an id it
        # cannot read counts as 0 ms. pool_delete_jobs is this histogram's count.
        elapsed = ids.elapsed_ms(job_id) if ids.is_valid(job_id) else 0
        series(JOB_ACK_ELAPSED_MS, pool, ns, queue).observe(elapsed)

    @_never_raises
    def respawned(self, pool: str, ns: str, queue: str, count: int) -> None:
        if count:
            series(DEADLETTER_RESPAWN_JOBS, pool).inc(count)

    @_never_raises
    def pumped(self, pool: str, ns: str, result: PumpResult) -> None:
        if result.to_ready or result.to_dead:
            series(TIMER_DUE_JOBS, pool).inc(result.to_ready + result.to_dead)
