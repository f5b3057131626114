"""Prometheus metrics under lmstfy's names, correct with any number of worker processes.

Every process writes its samples to files in one directory (prometheus-client's multiprocess
mode) and GET /metrics merges the files of all of them, so a scrape that reaches any worker
sees the whole server. `server.run` makes a fresh directory before it forks the workers and
removes it at exit; a process that never called it (tests, embedding) makes a private one on
first use. Either way the directory must be chosen before the first sample is written.

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

plus infra_lmstfy_http_http_codes, _latency_milliseconds (data port, 2xx only, as lmstfy) and
_rate_limit, and lmstfy-py's own lmstfy_http_requests_total and
lmstfy_http_request_duration_seconds for both ports, by app, route template, method, status.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import functools
import glob
import logging
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any, ParamSpec

from prometheus_client import Counter, Gauge, Histogram, values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from lmstfy_py import ids, tasks
from lmstfy_py.store import keys
from lmstfy_py.store.engine import Engine, EngineObserver, PumpResult
from lmstfy_py.store.pools import Pools
from lmstfy_py.types import Job, NewJob

log = logging.getLogger(__name__)
P = ParamSpec("P")

ENV = "PROMETHEUS_MULTIPROC_DIR"
DIR_PREFIX = "lmstfy-py-metrics-"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LMSTFY_PREFIX = "infra_lmstfy_"
COLLECT_EVERY_S = 5.0  # as lmstfy's size monitor
LOCK_FILE = "collector.lock"


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's prometheus.ExponentialBuckets, multiplied step by step so the bounds match to the bit."""
    bounds = [start]
    while len(bounds) < count:
        bounds.append(bounds[-1] * factor)
    return tuple(bounds)


JOB_MS_BUCKETS = _exponential(15, 3.5, 7)
HTTP_MS_BUCKETS = _exponential(15, 2.5, 9)
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# -- the multiprocess directory ------------------------------------------------------------

_directory: str | None = None
_directory_lock: int | None = None  # fd of the directory, flocked while this server lives


def new_directory() -> str:
    """A fresh directory for this server's metrics, used by this process and the workers it forks.

    Called by server.run before anything is measured; `remove_directory` at exit. The directory
    itself stays flocked while the server (any of its processes) lives: that tells a later
    server it is in use, and systemd-tmpfiles not to age it out.
    """
    global _directory, _directory_lock
    _remove_stale_directories()
    path = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")
    _directory_lock = _flocked_directory(path)
    os.environ[ENV] = path  # for anything else in the process that reads prometheus-client's variable
    # prometheus-client picks its value class when imported: switch it to files in `path`.
    # A series made before this call would keep writing where it was: server.run calls it first.
    values.ValueClass = values.MultiProcessValue()
    _directory = path
    return path


def directory() -> str:
    """This process's metrics directory; a private one, removed at exit, if server.run made none."""
    if _directory is None:
        path = new_directory()
        atexit.register(remove_directory, path, os.getpid())
    assert _directory is not None
    return _directory


def remove_directory(path: str, owner_pid: int | None = None) -> None:
    # A forked worker must not remove the directory its siblings still write to.
    if owner_pid is None or owner_pid == os.getpid():
        shutil.rmtree(path, ignore_errors=True)


def _flocked_directory(path: str) -> int | None:
    """An fd of the directory holding an exclusive flock on it; None if another process holds one."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_stale_directories() -> None:
    """Removes the directories of servers that died without cleaning up (kill -9).

    Stale means unlocked and its owner (the pid in its name) gone: either alone could be
    wrong, for a directory a server is creating this instant or one from another pid namespace.
    """
    for path in glob.glob(os.path.join(tempfile.gettempdir(), DIR_PREFIX + "*")):
        owner = os.path.basename(path).removeprefix(DIR_PREFIX).split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            fd = _flocked_directory(path)
            if fd is not None:
                shutil.rmtree(path, ignore_errors=True)
                os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


# -- the families --------------------------------------------------------------------------

_REDIS = "infra_lmstfy_redis_"
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


QUEUE_DIRECT_PUSH_JOBS = _counter(_REDIS + "queue_direct_push_jobs")
TIMER_ADD_JOBS = _counter(_REDIS + "timer_add_jobs")
CONSUME_JOBS = _counter(_REDIS + "consume_jobs")
CONSUME_MULTI_JOBS = _counter(_REDIS + "consume_multi_jobs")
TIMER_DUE_JOBS = _counter(_REDIS + "timer_due_jobs")
DEADLETTER_RESPAWN_JOBS = _counter(_REDIS + "deadletter_respawn_jobs")
PUBLISH_QUEUE_JOBS = _counter(_REDIS + "publish_queue_jobs", _QUEUE)
CONSUME_QUEUE_JOBS = _counter(_REDIS + "consume_queue_jobs", _QUEUE)
JOB_ELAPSED_MS = _histogram(_REDIS + "job_elapsed_ms", _QUEUE, JOB_MS_BUCKETS)
JOB_ACK_ELAPSED_MS = _histogram(_REDIS + "job_ack_elapsed_ms", _QUEUE, JOB_MS_BUCKETS)

TIMER_SIZES = _gauge(_REDIS + "timer_sizes")
QUEUE_SIZES = _gauge(_REDIS + "queue_sizes", _QUEUE)
DEADLETTER_SIZES = _gauge(_REDIS + "deadletter_sizes", _QUEUE)
# INFO field -> gauge; keyspace counts are summed over every db of the instance.
REDIS_GAUGES = {
    "maxmemory": _gauge(_REDIS + "max_mem_bytes"),
    "used_memory": _gauge(_REDIS + "used_mem_bytes"),
    "connected_clients": _gauge(_REDIS + "connections"),
    "blocked_clients": _gauge(_REDIS + "blocking_connections"),
    "keys": _gauge(_REDIS + "total_keys"),
    "expires": _gauge(_REDIS + "total_ttl_keys"),
}

HTTP_CODES = _counter("infra_lmstfy_http_http_codes", ("pool", "namespace", "api", "method", "code"))
HTTP_LATENCY_MS = _histogram(
    "infra_lmstfy_http_latency_milliseconds", ("pool", "namespace", "api", "method"), HTTP_MS_BUCKETS
)
RATE_LIMIT = _counter("infra_lmstfy_http_rate_limit", ("pool", "namespace", "token", "action"))

_ROUTE = ("app", "method", "route", "status")
HTTP_SECONDS = _histogram("lmstfy_http_request_duration_seconds", _ROUTE, SECONDS_BUCKETS, "HTTP request latency")


@dataclass(frozen=True)
class _Sum:
    """A counter computed at scrape time: the sum of other samples, by some of their labels.

    Each costs nothing per request. A sum of counters read at any moments still only grows.
    """

    name: str
    doc: str
    sources: tuple[str, ...]  # sample names
    by: tuple[str, ...]


_PUBLISHED = (_REDIS + "publish_queue_jobs_total",)
_CONSUMED = (_REDIS + "consume_jobs_total", _REDIS + "consume_multi_jobs_total")
_SUMS = (
    _Sum(_REDIS + "publish_jobs", "jobs published", _PUBLISHED, ("pool",)),
    _Sum(_REDIS + "pool_add_jobs", "jobs published", _PUBLISHED, ("pool",)),
    _Sum(_REDIS + "queue_pop_jobs", "jobs consumed", _CONSUMED, ("pool",)),
    _Sum(_REDIS + "pool_get_jobs", "jobs consumed", _CONSUMED, ("pool",)),
    _Sum(_REDIS + "pool_delete_jobs", "ACKs", (_REDIS + "job_ack_elapsed_ms_count",), ("pool",)),
    _Sum("lmstfy_http_requests", "HTTP requests answered", ("lmstfy_http_request_duration_seconds_count",), _ROUTE),
)

_children: dict[tuple[int, tuple[str, ...]], Any] = {}


def _child(family: Any, *labels: str) -> Any:
    """family.labels(*labels), minus its validation and lock on every call: this runs per request."""
    key = (id(family), labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = family.labels(*labels)
    return child


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


@_never_raises
def observe_request(app: str, method: str, route: str, status: int, seconds: float) -> None:
    """One answered HTTP request of either app, by route template (never the raw path)."""
    directory()
    _child(HTTP_SECONDS, app, method, route, str(status)).observe(seconds)


@_never_raises
def observe_lmstfy_request(pool: str, ns: str, api: str, method: str, status: int, seconds: float) -> None:
    """lmstfy's own HTTP families of the data port; like lmstfy, latency only of 2xx answers."""
    directory()
    _child(HTTP_CODES, pool, ns, api, method, str(status)).inc()
    if status < 300:
        _child(HTTP_LATENCY_MS, pool, ns, api, method).observe(seconds * 1000)


@_never_raises
def rate_limit_hit(pool: str, ns: str, token: str, action: str) -> None:
    """A publish ("produce") or consume ("consume") refused with 429 by the token's limit."""
    directory()
    _child(RATE_LIMIT, pool, ns, token, action).inc()


# -- what the engine reports ---------------------------------------------------------------


class EngineMetrics(EngineObserver):
    """Counts job operations in the engine, so they are counted whatever the caller."""

    @_never_raises
    def published(self, pool: str, ns: str, queue: str, jobs: Sequence[NewJob], replaces: str | None) -> None:
        delayed = sum(1 for job in jobs if job.delay_ms > 0)
        _child(PUBLISH_QUEUE_JOBS, pool, ns, queue).inc(len(jobs))
        if delayed:
            _child(TIMER_ADD_JOBS, pool).inc(delayed)
        if delayed < len(jobs):
            _child(QUEUE_DIRECT_PUSH_JOBS, pool).inc(len(jobs) - delayed)
        if replaces:  # lmstfy re-publishes with a DELETE then a publish
            self.acked(pool, ns, queue, replaces)

    @_never_raises
    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        # lmstfy's handler takes its multi-queue path for several queues or count > 1.
        _child(CONSUME_MULTI_JOBS if len(queues) > 1 or count > 1 else CONSUME_JOBS, pool).inc(len(jobs))
        for job in jobs:
            _child(CONSUME_QUEUE_JOBS, pool, ns, job.queue).inc()
            _child(JOB_ELAPSED_MS, pool, ns, job.queue).observe(job.elapsed_ms)

    @_never_raises
    def acked(self, pool: str, ns: str, queue: str, job_id: str) -> None:
        # As lmstfy: every ACK counts, whether or not the job still existed, and an id it
        # cannot read counts as 0 ms. pool_delete_jobs is this histogram's count.
        elapsed = ids.elapsed_ms(job_id) if ids.is_valid(job_id) else 0
        _child(JOB_ACK_ELAPSED_MS, pool, ns, queue).observe(elapsed)

    @_never_raises
    def respawned(self, pool: str, ns: str, queue: str, count: int) -> None:
        if count:
            _child(DEADLETTER_RESPAWN_JOBS, pool).inc(count)

    @_never_raises
    def pumped(self, pool: str, ns: str, result: PumpResult) -> None:
        if result.to_ready or result.to_dead:
            _child(TIMER_DUE_JOBS, pool).inc(result.to_ready + result.to_dead)


def observe_engines(engines: Iterable[Engine]) -> None:
    directory()
    observer = EngineMetrics()
    for engine in engines:
        engine.observer = observer


# -- the size and Redis collector ----------------------------------------------------------


class Collector:
    """Refreshes the size and Redis gauges in the background, so a scrape costs no Redis call.

    With several workers only the one holding the lock file in the metrics directory
    collects: they share the directory, so one set of gauges is enough.
    """

    def __init__(self, pools: Pools, every_s: float = COLLECT_EVERY_S) -> None:
        self.pools = pools
        self.every_s = every_s
        self._reported: dict[str, set[tuple[str, str]]] = {}  # pool -> (namespace, queue) with sizes set
        self._lock: IO[bytes] | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        directory()
        self._task = asyncio.create_task(self._run(), name="metrics-collector")

    async def stop(self) -> None:
        self._stopping.set()
        await tasks.finish(self._task)
        self._task = None
        if self._lock is not None:
            self._lock.close()  # releases the flock: another worker may take over
            self._lock = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            if self._holds_lock():
                await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.every_s)

    def _holds_lock(self) -> bool:
        if self._lock is None:
            handle = open(os.path.join(directory(), LOCK_FILE), "ab")  # noqa: SIM115 (held until stop)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            self._lock = handle
        return True

    async def refresh(self) -> None:
        """Reads every pool's sizes and Redis INFO now; a pool that fails keeps its last values."""
        for engine in self.pools.engines():
            try:
                await self._collect_sizes(engine)
                await _collect_info(engine)
            except (RedisError, OSError) as exc:
                log.warning("metrics of pool %s: %s", engine.pool, exc)

    async def _collect_sizes(self, engine: Engine) -> None:
        pool, client = engine.pool, engine.redis
        namespaces = await engine.namespaces()
        queue_sets = await _pipelined(client, [("smembers", keys.queues(ns)) for ns in namespaces])
        pairs = [(ns, q.decode()) for ns, members in zip(namespaces, queue_sets, strict=True) for q in sorted(members)]
        calls = [("zcard", keys.timer(ns)) for ns in namespaces]
        for ns, queue in pairs:
            calls += [("llen", keys.ready(ns, queue)), ("llen", keys.dead(ns, queue))]
        found = await _pipelined(client, calls)
        TIMER_SIZES.labels(pool).set(sum(found[: len(namespaces)]))
        sizes = found[len(namespaces) :]
        for i, (ns, queue) in enumerate(pairs):
            QUEUE_SIZES.labels(pool, ns, queue).set(sizes[2 * i])
            DEADLETTER_SIZES.labels(pool, ns, queue).set(sizes[2 * i + 1])
        # Files cannot forget a series: a queue that is gone (purged namespace) reads 0 from now on.
        for ns, queue in self._reported.get(pool, set()) - set(pairs):
            QUEUE_SIZES.labels(pool, ns, queue).set(0)
            DEADLETTER_SIZES.labels(pool, ns, queue).set(0)
        self._reported[pool] = set(pairs)


async def _pipelined(client: Any, calls: Sequence[tuple[str, str]]) -> list[Any]:
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for command, key in calls:
        getattr(pipe, command)(key)
    return list(await pipe.execute())


async def _collect_info(engine: Engine) -> None:
    """lmstfy's Redis gauges from INFO, summed over a cluster's primaries."""
    client = engine.redis
    if isinstance(client, RedisCluster):
        await client.initialize()  # a no-op once the client knows its nodes
        infos = [await client.info(target_nodes=node) for node in client.get_primaries()]
    else:
        infos = [await client.info()]
    totals = dict.fromkeys(REDIS_GAUGES, 0)
    for info in infos:
        for field in ("maxmemory", "used_memory", "connected_clients", "blocked_clients"):
            totals[field] += int(info.get(field, 0))
        for name, db in info.items():
            if name.startswith("db") and isinstance(db, dict):
                totals["keys"] += int(db.get("keys", 0))
                totals["expires"] += int(db.get("expires", 0))
    for field, gauge in REDIS_GAUGES.items():
        gauge.labels(engine.pool).set(totals[field])


# -- the exposition ------------------------------------------------------------------------


def exposition() -> bytes:
    """Every process's samples, merged, in Prometheus text format 0.0.4 (what lmstfy serves)."""
    families = list(MultiProcessCollector(None, path=directory()).collect())
    by_name: dict[str, list[Sample]] = defaultdict(list)
    for family in families:
        for sample in family.samples:
            by_name[sample.name].append(sample)
    families += [family for spec in _SUMS if (family := _summed(spec, by_name)) is not None]
    return "".join(_family_text(family) for family in sorted(families, key=lambda f: f.name)).encode()


def _summed(spec: _Sum, by_name: dict[str, list[Sample]]) -> Metric | None:
    totals: dict[tuple[str, ...], float] = defaultdict(float)
    for source in spec.sources:
        for sample in by_name.get(source, ()):
            totals[tuple(sample.labels.get(label, "") for label in spec.by)] += sample.value
    if not totals:
        return None  # like any other family: not shown before its first sample
    family = Metric(spec.name, spec.doc, "counter")
    for labels, value in totals.items():
        family.add_sample(spec.name + "_total", dict(zip(spec.by, labels, strict=True)), value)
    return family


def _family_text(family: Metric) -> str:
    name, samples = family.name, list(family.samples)
    if family.type == "counter":
        if name.startswith(LMSTFY_PREFIX):
            samples = [s._replace(name=name) for s in samples]  # the Go client adds no _total
        else:
            name += "_total"
    doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
    lines = [f"# HELP {name} {doc}\n", f"# TYPE {name} {family.type}\n"]
    lines += [_sample_line(sample) for sample in sorted(samples, key=_sample_order)]
    return "".join(lines)


_SUFFIX_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2}


def _sample_order(sample: Sample) -> tuple[Any, ...]:
    labels = sorted((k, v) for k, v in sample.labels.items() if k != "le")
    suffix = next((order for suffix, order in _SUFFIX_ORDER.items() if sample.name.endswith(suffix)), 0)
    return (labels, suffix, float(sample.labels.get("le", 0)))


def _sample_line(sample: Sample) -> str:
    labels = ",".join(f'{k}="{_escape(_le(v) if k == "le" else v)}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n"


def _le(bound: str) -> str:
    """A bucket bound as Go writes it ("15", not "15.0"): Prometheus 2 stores le as text."""
    return bound[:-2] if bound.endswith(".0") else bound


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
