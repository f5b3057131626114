"""Each TracedStep the Engine reports becomes a span `lmstfy.<kind>`, exported over OTLP/HTTP.

A span sits in the job's trace with the job's traceparent's id as its parent (a remote, sampled
SpanContext: the producer's span), starts and ends at the step's times, and is a PRODUCER span for
the publish and a CONSUMER span for everything after (OpenTelemetry's messaging conventions: the
publish sends, each later step is the queue acting on the delivered job). Attributes: messaging.system
"lmstfy", messaging.destination.name the queue, messaging.message.id the job id, lmstfy.namespace and
lmstfy.pool; the resource's service.name is the configured one.

`traced` runs on the request's path: it makes the span in memory and hands it to the batching
(bounded.py), no I/O; it never raises (the step it reports has already happened). The span is the
SDK's finished-span type, ReadableSpan, made directly: a Tracer's start_span and end cost 5 times as
much (sampler, contexts, attribute checks) to learn what the step already says. The batching's
thread sends the spans with otlp.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags, TraceState

from lmstfy_py import __version__, metrics
from lmstfy_py.store.engine_base import EngineObserver, TracedKind, TracedStep
from lmstfy_py.tracing.bounded import EXPORT_TIMEOUT_S, BoundedBatch
from lmstfy_py.tracing.otlp import OtlpHttpExporter

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for spans, after the configured base URL
STOP_S = EXPORT_TIMEOUT_S  # what a stop waits for the last spans to leave
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS: dict[TracedKind, SpanKind] = {
    "publish": SpanKind.PRODUCER,
    "consume": SpanKind.CONSUMER,
    "ack": SpanKind.CONSUMER,
    "complete": SpanKind.CONSUMER,
    "release": SpanKind.CONSUMER,
    "bury": SpanKind.CONSUMER,
    "dead": SpanKind.CONSUMER,
}
_NAMES = {kind: "lmstfy." + kind for kind in _KINDS}


def traces_url(endpoint: str) -> str:
    """The URL spans are POSTed to: OTLP/HTTP's path after the configured base URL."""
    return endpoint.rstrip("/") + TRACES_PATH


# The server checked the header's shape (1..512 printable bytes), not W3C's list-member grammar:
# the SDK's parser logs and empties one it rejects, so each distinct value is parsed once.
@functools.lru_cache(maxsize=1024)
def trace_state(header: str | None) -> TraceState | None:
    return TraceState.from_header([header]) if header else None


def _span_id() -> int:
    # What the SDK's RandomIdGenerator does; 0 is no valid id. `random` is re-seeded in a forked child.
    return random.getrandbits(64) or 1


class SpanExport(EngineObserver):
    """Exports a span for every traced step of this process, to `endpoint`/v1/traces.

    Made in the process whose steps it exports: the batching's thread starts here."""

    def __init__(self, endpoint: str, service_name: str) -> None:
        loop = asyncio.get_running_loop()  # where the export thread hands its counts over

        def failed(count: int) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(metrics.otlp_spans_dropped, "export_failed", count)

        exporter = OtlpHttpExporter(traces_url(endpoint), service_name, ("lmstfy_py", __version__), EXPORT_TIMEOUT_S)
        self.batch = BoundedBatch(exporter, failed)
        self.resource = Resource({SERVICE_NAME: service_name})  # the exporter sends its own copy
        self.scope = InstrumentationScope("lmstfy_py", __version__)

    def traced(self, step: TracedStep) -> None:
        try:
            self._span(step)
        except Exception:
            log.exception("tracing: the span of a %s failed", step.kind)

    def _span(self, step: TracedStep) -> None:
        if not step.trace.sampled:
            return
        if self.batch.full:
            metrics.otlp_spans_dropped("queue_full", 1)
            return
        trace = step.trace
        trace_id, state = int(trace.trace_id, 16), trace_state(trace.tracestate)
        attributes = {
            "messaging.system": "lmstfy",
            "messaging.destination.name": step.queue,
            "messaging.message.id": step.job_id,
            "lmstfy.namespace": step.ns,
            "lmstfy.pool": step.pool,
        }
        span = ReadableSpan(
            _NAMES[step.kind],
            SpanContext(trace_id, _span_id(), is_remote=False, trace_flags=SAMPLED, trace_state=state),
            SpanContext(trace_id, int(trace.parent_id, 16), is_remote=True, trace_flags=SAMPLED, trace_state=state),
            self.resource,
            attributes,
            kind=_KINDS[step.kind],
            start_time=step.start_ns,
            end_time=step.end_ns,
            instrumentation_scope=self.scope,
        )
        self.batch.on_end(span)

    async def close(self) -> None:
        """Sends what still waits, for at most STOP_S: a dead collector must not hold the stop (the
        thread is a daemon, ended with the process if the collector never answers)."""
        stopping = threading.Thread(target=self.batch.shutdown, name="lmstfy-otlp-stop", daemon=True)
        stopping.start()
        await asyncio.to_thread(stopping.join, STOP_S)
