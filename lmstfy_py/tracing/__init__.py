"""OTLP/HTTP export of the spans of traced jobs (SPEC 15, "Export").

With `[tracing] otlp_endpoint` (or `--otlp-endpoint`) every server process turns each step the
Engine reports on a job whose traceparent is sampled (EngineObserver.traced) into a span and sends
it, batched, to `<endpoint>/v1/traces`: export.py makes the spans, bounded.py keeps the batching
from ever holding a request. OpenTelemetry (the [otel] extra) is imported by this package only,
and only once an endpoint is set: this module itself imports none of it, so a server without the
option never loads it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client imports propagation.py: this package's import stays light
    from lmstfy_py.config import TracingConfig
    from lmstfy_py.tracing.export import SpanExport


@contextlib.asynccontextmanager
async def exporting(config: TracingConfig) -> AsyncIterator[SpanExport | None]:
    """The span export of this process while the block runs (None without an endpoint), sending
    what still waits when left. Entered in each worker process, after the fork: the SDK's export
    thread must run in the process whose spans it sends."""
    if config.otlp_endpoint is None:
        yield None
        return
    from lmstfy_py.tracing.export import SpanExport  # the [otel] extra: only with an endpoint

    export = SpanExport(config.otlp_endpoint, config.service_name)
    try:
        yield export
    finally:
        await export.close()
