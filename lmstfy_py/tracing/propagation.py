"""W3C trace context between an application's OpenTelemetry and its jobs (SPEC 15): the client sends
the current span's context with each publish, the worker runs each handler inside its job's context,
so that one trace shows the producer, the server's steps and the worker.

Only opentelemetry-api, never the SDK, and only where it is installed: without it the client and
the worker work as before. The W3C format is written and read directly (what the server keeps),
whatever propagators the application configured globally.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from lmstfy_py.client.job import Job


@functools.cache
def _w3c() -> TraceContextTextMapPropagator | None:
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    return TraceContextTextMapPropagator()


def current_headers() -> dict[str, str]:
    """`traceparent` (and `tracestate`) of the current span; {} when there is none. Without
    opentelemetry-api loaded in this process no span can be current: nothing is imported then."""
    if "opentelemetry.trace" not in sys.modules:
        return {}
    propagator = _w3c()
    carrier: dict[str, str] = {}
    if propagator is not None:
        propagator.inject(carrier)  # writes nothing without a valid current span context
    return carrier


def _job_headers(job: Job) -> dict[str, str]:
    carrier = {"traceparent": job.traceparent or ""}
    if job.tracestate:
        carrier["tracestate"] = job.tracestate
    return carrier


def in_job_context(handler: Callable[[Job], Any], is_async: bool) -> Callable[[Job], Any]:
    """`handler`, run inside the trace context its job was published with (when it has one): the
    spans the handler starts are children of the producer's span. Without opentelemetry-api, as is."""
    propagator = _w3c()
    if propagator is None:
        return handler
    from opentelemetry import context

    def run(job: Job) -> Any:
        if job.traceparent is None:
            return handler(job)
        token = context.attach(propagator.extract(_job_headers(job)))
        try:
            return handler(job)
        finally:
            context.detach(token)

    async def run_async(job: Job) -> Any:
        if job.traceparent is None:
            return await handler(job)
        token = context.attach(propagator.extract(_job_headers(job)))
        try:
            return await handler(job)  # the job's own task: its context is this job's alone
        finally:
            context.detach(token)

    wrapped: Callable[[Job], Awaitable[Any]] | Callable[[Job], Any] = run_async if is_async else run
    return wrapped
