"""The metric families: lmstfy's names, types, labels and buckets, and lmstfy-py's own.

Defined at import, with no registry: prometheus-client's multiprocess mode (metrics/multiproc.py)
writes each series to a file when its first child is made, and exposition.py merges them.
This module imports nothing of the store, so any module may record into a family.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram, Summary

LMSTFY_PREFIX = "infra_lmstfy_"


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's prometheus.ExponentialBuckets, multiplied step by step so the bounds match to the bit."""
    bounds = [start]
    while len(bounds) < count:
        bounds.append(bounds[-1] * factor)
    return tuple(bounds)


JOB_MS_BUCKETS = _exponential(15, 3.5, 7)
HTTP_MS_BUCKETS = _exponential(15, 2.5, 9)
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# -- the families --------------------------------------------------------------------------

REDIS_PREFIX = "infra_lmstfy_redis_"
_QUEUE = ("pool", "namespace", "queue")


def _doc(name: str) -> str:
    return name.removeprefix(LMSTFY_PREFIX).replace("_", " ")


def _counter(name: str, labels: Sequence[str] = ("pool",)) -> Counter:
    return Counter(name, _doc(name), labels, registry=None)


def _gauge(name: str, labels: Sequence[str] = ("pool",)) -> Gauge:
    # Only the worker holding the collector lock sets them; "mostrecent" also survives a hand-over.
    return Gauge(name, _doc(name), labels, registry=None, multiprocess_mode="mostrecent")


def _histogram(name: str, labels: Sequence[str], buckets: Sequence[float], doc: str = "") -> Histogram:
    return Histogram(name, doc or _doc(name), labels, registry=None, buckets=buckets)


QUEUE_DIRECT_PUSH_JOBS = _counter(REDIS_PREFIX + "queue_direct_push_jobs")
TIMER_ADD_JOBS = _counter(REDIS_PREFIX + "timer_add_jobs")
CONSUME_JOBS = _counter(REDIS_PREFIX + "consume_jobs")
CONSUME_MULTI_JOBS = _counter(REDIS_PREFIX + "consume_multi_jobs")
TIMER_DUE_JOBS = _counter(REDIS_PREFIX + "timer_due_jobs")
DEADLETTER_RESPAWN_JOBS = _counter(REDIS_PREFIX + "deadletter_respawn_jobs")
PUBLISH_QUEUE_JOBS = _counter(REDIS_PREFIX + "publish_queue_jobs", _QUEUE)
CONSUME_QUEUE_JOBS = _counter(REDIS_PREFIX + "consume_queue_jobs", _QUEUE)
JOB_ELAPSED_MS = _histogram(REDIS_PREFIX + "job_elapsed_ms", _QUEUE, JOB_MS_BUCKETS)
JOB_ACK_ELAPSED_MS = _histogram(REDIS_PREFIX + "job_ack_elapsed_ms", _QUEUE, JOB_MS_BUCKETS)

TIMER_SIZES = _gauge(REDIS_PREFIX + "timer_sizes")
QUEUE_SIZES = _gauge(REDIS_PREFIX + "queue_sizes", _QUEUE)
DEADLETTER_SIZES = _gauge(REDIS_PREFIX + "deadletter_sizes", _QUEUE)
# INFO field -> gauge; keyspace counts are summed over every db of the instance.
REDIS_GAUGES = {
    "maxmemory": _gauge(REDIS_PREFIX + "max_mem_bytes"),
    "used_memory": _gauge(REDIS_PREFIX + "used_mem_bytes"),
    "connected_clients": _gauge(REDIS_PREFIX + "connections"),
    "blocked_clients": _gauge(REDIS_PREFIX + "blocking_connections"),
    "keys": _gauge(REDIS_PREFIX + "total_keys"),
    "expires": _gauge(REDIS_PREFIX + "total_ttl_keys"),
}

# lmstfy >= 1.0.11's Redis client metrics (its helper/redis/hooks): each command by node (the
# Redis address), command (lower-cased; "pipeline" for a batch) and status ("ok" or "error"), in
# whole milliseconds as Go's Duration.Milliseconds() counts them.
REDIS_COMMAND_LABELS = ("node", "command", "status")
REDIS_COMMAND_MS_BUCKETS = _exponential(1, 2, 16)
REDIS_LATENCY = _histogram(
    REDIS_PREFIX + "latency", REDIS_COMMAND_LABELS, REDIS_COMMAND_MS_BUCKETS, "redis command latencies (ms)"
)
REDIS_QPS = Counter(REDIS_PREFIX + "qps", "redis commands", REDIS_COMMAND_LABELS, registry=None)

HTTP_CODES = _counter("infra_lmstfy_http_http_codes", ("pool", "namespace", "api", "method", "code"))
HTTP_LATENCY_MS = _histogram(
    "infra_lmstfy_http_latency_milliseconds", ("pool", "namespace", "api", "method"), HTTP_MS_BUCKETS
)
RATE_LIMIT = _counter("infra_lmstfy_http_rate_limit", ("pool", "namespace", "token", "action"))

ROUTE_LABELS = ("app", "method", "route", "status")
HTTP_SECONDS = _histogram("lmstfy_http_request_duration_seconds", ROUTE_LABELS, SECONDS_BUCKETS, "HTTP request latency")

# lmstfy's pusher families (its push/metrics.go): summaries there, here count and sum (the
# multiprocess mode computes no quantiles), labelled by the pushed job's queue.
_PUSHER = "infra_lmstfy_pusher_"
PUSH_CONSUME_MS = Summary(_PUSHER + "consume_latency_milliseconds", "latencies", _QUEUE, registry=None)
PUSH_LATENCY_MS = Summary(_PUSHER + "push_latency_milliseconds", "push http latencies", _QUEUE, registry=None)
PUSH_HTTP_CODES = Counter(_PUSHER + "push_http_codes", "push response code", (*_QUEUE, "code"), registry=None)
# lmstfy-py's own: every delivery by group and outcome (an HTTP status, "timeout" or "unreachable").
PUSH_DELIVERIES = Counter(
    "lmstfy_push_deliveries", "push deliveries by outcome", ("pool", "namespace", "group", "outcome"), registry=None
)

# lmstfy-py's own: background loops (tasks.Loop) restarted after an unexpected exception, by loop kind.
LOOP_RESTARTS = Counter(
    "lmstfy_background_restarts", "background loops restarted after a crash", ("loop",), registry=None
)

# lmstfy-py's own (SPEC 15): spans of traced jobs the OTLP export lost, by reason: "queue_full" (2,048
# were already waiting for the collector) or "export_failed" (the collector refused or did not answer).
OTLP_SPANS_DROPPED = Counter("lmstfy_otlp_spans_dropped", "spans the OTLP export dropped", ("reason",), registry=None)
