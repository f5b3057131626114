"""Each TracedStep the Engine reports becomes a span `lmstfy.<kind>`, exported over OTLP/HTTP.

A span sits in the job's trace with the job's traceparent's id as its parent (a remote, sampled
SpanContext: the producer's span), starts and ends at the step's times, and is a PRODUCER span for
the publish and a CONSUMER span for everything after (OpenTelemetry's messaging conventions: the
publish sends, each later step is the queue acting on the delivered job). Attributes: messaging.system
"lmstfy", messaging.destination.name the queue, messaging.message.id the job id, lmstfy.namespace and
lmstfy.pool; the resource's service.name is the configured one.

`traced` runs on the request's path: it makes the span in memory and hands it to the batching
(bounded.py), no I/O; it never raises (the step it reports has already happened).
"""

from __future__ import annotations

import asyncio
import logging
import threading

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState

from lmstfy_py import __version__, metrics
from lmstfy_py.store.engine_base import EngineObserver, TracedKind, TracedStep
from lmstfy_py.tracing.bounded import EXPORT_TIMEOUT_S, BoundedBatch
from lmstfy_py.types import TraceContext

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for spans, after the configured base URL
STOP_S = EXPORT_TIMEOUT_S  # what a stop waits for the last spans to leave
_KINDS: dict[TracedKind, SpanKind] = {
    "publish": SpanKind.PRODUCER,
    "consume": SpanKind.CONSUMER,
    "ack": SpanKind.CONSUMER,
    "complete": SpanKind.CONSUMER,
    "release": SpanKind.CONSUMER,
    "bury": SpanKind.CONSUMER,
    "dead": SpanKind.CONSUMER,
}


def traces_url(endpoint: str) -> str:
    """The URL spans are POSTed to. The exporter given an endpoint uses it as is (only the environment's
    OTEL_EXPORTER_OTLP_ENDPOINT gets /v1/traces appended), so the path is added here."""
    return endpoint.rstrip("/") + TRACES_PATH


def remote_parent(context: TraceContext) -> Context:
    """A context whose current span is the job's traceparent: the parent of the step's span."""
    state = TraceState.from_header([context.tracestate]) if context.tracestate else None
    parent = SpanContext(
        int(context.trace_id, 16),
        int(context.parent_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=state,
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


class SpanExport(EngineObserver):
    """Exports a span for every traced step of this process, to `endpoint`/v1/traces."""

    def __init__(self, endpoint: str, service_name: str) -> None:
        loop = asyncio.get_running_loop()  # where the export thread hands its counts over

        def failed(count: int) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(metrics.otlp_spans_dropped, "export_failed", count)

        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S)
        self.batch = BoundedBatch(exporter, failed)
        # No global provider, no exit hook: this process's spans are the server's, stopped by close().
        resource = Resource.create({SERVICE_NAME: service_name})
        self.provider = TracerProvider(sampler=ParentBased(ALWAYS_ON), resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(self.batch)
        self.tracer = self.provider.get_tracer("lmstfy_py", __version__)

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
        attributes = {
            "messaging.system": "lmstfy",
            "messaging.destination.name": step.queue,
            "messaging.message.id": step.job_id,
            "lmstfy.namespace": step.ns,
            "lmstfy.pool": step.pool,
        }
        span = self.tracer.start_span(
            "lmstfy." + step.kind,
            context=remote_parent(step.trace),
            kind=_KINDS[step.kind],
            attributes=attributes,
            start_time=step.start_ns,
        )
        span.end(end_time=step.end_ns)

    async def close(self) -> None:
        """Sends what still waits, for at most STOP_S: a dead collector must not hold the stop (the
        thread is a daemon, ended with the process if the collector never answers)."""
        stopping = threading.Thread(target=self.provider.shutdown, name="lmstfy-otlp-stop", daemon=True)
        stopping.start()
        await asyncio.to_thread(stopping.join, STOP_S)
