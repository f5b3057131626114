"""The SDK's BatchSpanProcessor, bounded and counted: a slow or absent collector never delays a request.

The SDK already keeps the spans in a bounded queue and sends them from its own thread, but past its
bound it drops a span with only a log line. Here the spans waiting for the export thread are counted
(ended here, taken by the exporter there), and a span past MAX_WAITING is refused before it is even
made (`full`), so its loss is counted in lmstfy_otlp_spans_dropped_total{reason="queue_full"}. A batch
the collector refused or did not answer within EXPORT_TIMEOUT_S is counted there too ("export_failed").

One export thread per process sends one batch at a time, each bounded by EXPORT_TIMEOUT_S (the
exporter's retries stay within it): a dead collector costs that thread's time, never more threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

MAX_WAITING = 2048  # spans of one process waiting for the export thread (SPEC 15)
BATCH = 512  # spans per POST, the SDK's default
# The export thread wakes this often (or at BATCH waiting spans): with a live collector every span is
# there within this plus one POST, well inside SPEC 15's 2 s.
SCHEDULE_DELAY_MS = 500
EXPORT_TIMEOUT_S = 2.0  # one POST, retries included: a dead collector holds the thread no longer


class _Counted(SpanExporter):
    """The exporter, counting the spans it took (the export thread's only) and those it failed to send."""

    def __init__(self, exporter: SpanExporter, failed: Callable[[int], None]) -> None:
        self.exporter, self.failed = exporter, failed
        self.taken = 0  # written by the export thread, read by the event loop's: one int, atomic

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.taken += len(spans)
        result = self.exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed(len(spans))
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class BoundedBatch(SpanProcessor):
    """BatchSpanProcessor(MAX_WAITING, SCHEDULE_DELAY_MS, BATCH) that says when it is `full`.

    `failed(n)`: n spans were lost by the collector, called on the export thread."""

    def __init__(self, exporter: SpanExporter, failed: Callable[[int], None]) -> None:
        self.exporter = exporter
        self._exporter = _Counted(exporter, failed)
        self._batch = BatchSpanProcessor(
            self._exporter,
            max_queue_size=MAX_WAITING,
            schedule_delay_millis=SCHEDULE_DELAY_MS,
            max_export_batch_size=BATCH,
            export_timeout_millis=EXPORT_TIMEOUT_S * 1000,
        )
        self._ended = 0  # the event loop's thread only

    @property
    def full(self) -> bool:
        """MAX_WAITING spans wait already: the next would push the SDK's queue past its bound."""
        return self._ended - self._exporter.taken >= MAX_WAITING

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:  # what the SDK's queue takes
            self._ended += 1
            self._batch.on_end(span)

    def shutdown(self) -> None:
        self._batch.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)
