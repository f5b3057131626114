"""The client sends the current span's W3C context with every publish, and the worker runs a handler
inside its job's context (SPEC 15), with opentelemetry-api alone (no global SDK set up)."""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from lmstfy_py.client import Job
from lmstfy_py.client.routes import PublishOptions, Routes
from lmstfy_py.tracing.propagation import in_job_context

TRACER = TracerProvider().get_tracer("test")
JOB_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def traceparent_of(span: trace.Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def test_every_publish_carries_the_current_span_and_a_given_traceparent_wins() -> None:
    routes = Routes("ns")
    assert "traceparent" not in routes.publish("q", "x", PublishOptions(), None).headers
    with TRACER.start_as_current_span("produce") as span:
        calls = [
            routes.publish("q", "x", PublishOptions(attributes={"k": "v"}), None),
            routes.publish_many("q", [1, 2], PublishOptions(), None),
            routes.republish("q", "old", "x", PublishOptions(), None),
        ]
        given = routes.publish("q", "x", PublishOptions(traceparent=JOB_PARENT, tracestate="a=b"), None)
    for call in calls:
        assert call.headers["traceparent"] == traceparent_of(span)
    assert calls[0].headers["Job-Attr-k"] == "v"
    assert (given.headers["traceparent"], given.headers["tracestate"]) == (JOB_PARENT, "a=b")


def job(traceparent: str | None) -> Job:
    return Job("id", "ns", "q", b"", traceparent=traceparent, tracestate="vendor=1" if traceparent else None)


def current() -> trace.SpanContext:
    return trace.get_current_span().get_span_context()


def test_a_handler_runs_inside_its_jobs_trace_context_and_leaves_it() -> None:
    seen: list[trace.SpanContext] = []
    handler = in_job_context(lambda job: seen.append(current()), is_async=False)
    handler(job(JOB_PARENT))
    handler(job(None))
    assert (f"{seen[0].trace_id:032x}", f"{seen[0].span_id:016x}") == (JOB_PARENT[3:35], JOB_PARENT[36:52])
    assert seen[0].is_remote and seen[0].trace_state.get("vendor") == "1"
    assert not seen[1].is_valid and not current().is_valid


def test_an_async_handler_too() -> None:
    async def handle(job: Job) -> str:
        with TRACER.start_as_current_span("handle") as span:
            return f"{span.get_span_context().trace_id:032x}/{span.parent.span_id:016x}"  # type: ignore[union-attr]

    assert (
        asyncio.run(in_job_context(handle, is_async=True)(job(JOB_PARENT))) == f"{JOB_PARENT[3:35]}/{JOB_PARENT[36:52]}"
    )
