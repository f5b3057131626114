"""Prometheus metrics under lmstfy's names, correct with any number of worker processes.

Every process writes its samples to files in one directory (prometheus-client's multiprocess
mode) and GET /metrics merges the files of all of them, so a scrape that reaches any worker
sees the whole server: its own counts exact, the other workers' as of their last flush, at
most FLUSH_S (1 s) old (pending.py: counts are kept in the process and written in batches).
`server.run` makes a fresh directory before it forks the workers and removes it at exit; a
process that never called it (tests, embedding) makes a private one on first use. Either way the
directory must be chosen before the first sample is written.

lmstfy's families keep its exact names, types, labels and buckets (dashboards keep working);
its counters are exposed without a `_total` suffix, as the Go client does:

infra_lmstfy_redis_... (every family has the label `pool`):
  publish_jobs, pool_add_jobs           jobs published; queue_direct_push_jobs / timer_add_jobs: without / with delay
  consume_jobs / consume_multi_jobs     jobs consumed by a one-queue count=1 consume / any other (lmstfy's split)
  queue_pop_jobs, pool_get_jobs         jobs consumed
  pool_delete_jobs                      ACKs (a re-publish ACKs too)
  timer_due_jobs                        timer entries the pump made ready or dead
  deadletter_respawn_jobs               dead jobs respawned
  publish_queue_jobs, consume_queue_jobs               + namespace, queue
  job_elapsed_ms, job_ack_elapsed_ms    histograms + namespace, queue: ms since publish at consume / ACK
  queue_sizes, deadletter_sizes         gauges + namespace, queue: ready / dead jobs
  timer_sizes, used_mem_bytes, max_mem_bytes, connections, blocking_connections, total_keys, total_ttl_keys

  latency, qps                          histogram, counter by node, command, status: every Redis command
                                        (lmstfy >= 1.0.11's Redis client hook; redis_commands.py, no pool label)

plus process_* (each worker's, labelled `worker`: process.py), infra_lmstfy_http_http_codes,
_latency_milliseconds (data port, 2xx only, as lmstfy) and _rate_limit, and lmstfy-py's own
lmstfy_http_requests_total and lmstfy_http_request_duration_seconds for both ports, by app, route
template, method, status, and lmstfy_otlp_spans_dropped_total by reason (tracing/, SPEC 15).
"""

from lmstfy_py.metrics.collector import Collector
from lmstfy_py.metrics.exposition import CONTENT_TYPE, exposition
from lmstfy_py.metrics.multiproc import DIR_PREFIX, directory, new_directory, remove_directory
from lmstfy_py.metrics.pending import FLUSH_S, Flusher, flush
from lmstfy_py.metrics.process import register as register_process
from lmstfy_py.metrics.recording import (
    EngineMetrics,
    RequestSeries,
    otlp_spans_dropped,
    push_consumed,
    pushed,
    rate_limit_hit,
    request_series,
)
from lmstfy_py.metrics.redis_commands import redis_command_counter

__all__ = [
    "CONTENT_TYPE",
    "DIR_PREFIX",
    "FLUSH_S",
    "Collector",
    "EngineMetrics",
    "Flusher",
    "RequestSeries",
    "directory",
    "exposition",
    "flush",
    "new_directory",
    "otlp_spans_dropped",
    "push_consumed",
    "pushed",
    "rate_limit_hit",
    "redis_command_counter",
    "register_process",
    "remove_directory",
    "request_series",
]
