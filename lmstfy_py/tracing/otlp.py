"""The OTLP/HTTP exporter of lmstfy's spans: a batch becomes one ExportTraceServiceRequest of
opentelemetry-proto's messages, POSTed as application/x-protobuf.

Why not the SDK's OTLPSpanExporter: its encoder builds every span's messages field by field, 61 µs a
span on the test VM, which put +25 % on a sampled publish's CPU (the issue allows +15 %); lmstfy's
spans differ only in ids, times and a few strings, so each is a copy of a per-queue template with
those set, 9 µs (docs/PERFORMANCE.md, "Access and tracing"). The messages are the standard ones,
only their filling is ours.

Each POST (retries included) ends within `timeout` seconds: the batching has one thread, and a
collector that never answers must cost it no more.
"""

from __future__ import annotations

import base64
import functools
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from lmstfy_py.push import shown

log = logging.getLogger(__name__)

HEADERS = {"Content-Type": "application/x-protobuf"}
RETRYABLE = frozenset({429, 502, 503, 504})  # OTLP/HTTP's "try again later"
RETRY_AFTER_S = 0.2
MESSAGE_ID = "messaging.message.id"  # the one attribute that differs per job
# The others, the same for every span of a queue's step kind (export.py sets all of them).
CONSTANT = ("messaging.system", "messaging.destination.name", "lmstfy.namespace", "lmstfy.pool")
_KINDS = {SpanKind.PRODUCER: Span.SPAN_KIND_PRODUCER, SpanKind.CONSUMER: Span.SPAN_KIND_CONSUMER}
# The parent is always the producer's remote span (SDK's encoder: the same two flags).
_FLAGS = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


def _key_values(attributes: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in attributes.items()]


@functools.lru_cache(maxsize=4096)  # a step kind of a queue: bounded, as clients may name endless queues
def _template(name: str, kind: SpanKind, *values: str) -> Span:
    attributes = _key_values(dict(zip(CONSTANT, values, strict=True)))
    return Span(name=name, kind=_KINDS.get(kind, Span.SPAN_KIND_INTERNAL), flags=_FLAGS, attributes=attributes)


def encode(spans: Sequence[ReadableSpan], resource: Resource, scope: InstrumentationScope) -> bytes:
    """One request of `spans` (export.py's: one resource and scope, a parent and the attributes
    CONSTANT and MESSAGE_ID each), serialized."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.CopyFrom(resource)
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(scope)
    for span in spans:
        attributes: Any = span.attributes
        out = scope_spans.spans.add()
        out.CopyFrom(_template(span.name, span.kind, *(attributes[key] for key in CONSTANT)))
        context, parent = span.context, span.parent
        assert context is not None and parent is not None  # made so by export.py
        out.trace_id = context.trace_id.to_bytes(16, "big")
        out.span_id = context.span_id.to_bytes(8, "big")
        out.parent_span_id = parent.span_id.to_bytes(8, "big")
        if context.trace_state:
            out.trace_state = context.trace_state.to_header()
        out.start_time_unix_nano = span.start_time or 0
        out.end_time_unix_nano = span.end_time or 0
        added = out.attributes.add()
        added.key, added.value.string_value = MESSAGE_ID, attributes[MESSAGE_ID]
    body: bytes = request.SerializeToString()
    return body


def _with_basic_auth(url: str) -> tuple[str, dict[str, str]]:
    """`url` without the credentials it may hold, and the headers that send them (basic auth):
    urllib does not read user:password@ in a URL (it takes the password for a port)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, HEADERS
    user, password = unquote(parts.username), unquote(parts.password or "")
    netloc = parts.netloc.rsplit("@", 1)[1]
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urlunsplit(parts._replace(netloc=netloc)), {**HEADERS, "Authorization": f"Basic {credentials}"}


class OtlpHttpExporter(SpanExporter):
    """POSTs each batch to `url` (the collector's .../v1/traces) within `timeout` seconds."""

    def __init__(self, url: str, service_name: str, scope: tuple[str, str], timeout: float) -> None:
        self.url, self.headers = _with_basic_auth(url)
        self.timeout = timeout
        self.shown_url = shown.endpoint(url)  # what logs may say: credentials in a URL are secrets
        self.failing = False  # one log line when the collector stops answering, one when it is back
        self.resource = Resource(attributes=_key_values({"service.name": service_name}))
        self.scope = InstrumentationScope(name=scope[0], version=scope[1])

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = encode(spans, self.resource, self.scope)
        deadline = time.monotonic() + self.timeout
        while (left := deadline - time.monotonic()) > 0:
            status = self._post(body, left)
            if 200 <= status < 300:
                if self.failing:
                    self.failing = False
                    log.warning("tracing: the collector at %s answers again", self.shown_url)
                return SpanExportResult.SUCCESS
            if status not in RETRYABLE or deadline - time.monotonic() < RETRY_AFTER_S:
                break
            time.sleep(RETRY_AFTER_S)
        return SpanExportResult.FAILURE

    def _post(self, body: bytes, timeout: float) -> int:
        """The answer's status; 0 when none came (refused, reset, timed out)."""
        request = urllib.request.Request(self.url, body, self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # http(s) only: config
                return int(answer.status)
        except urllib.error.HTTPError as error:
            self._failed(f"answered {error.code} to a batch of {len(body)} bytes")
            return error.code
        except Exception as error:  # OSError, http.client's BadStatusLine...: only its name is shown
            # Anything raised here would reach the SDK's batch thread, which logs it with its traceback
            # (URL included) every batch and counts nothing.
            self._failed(f"did not answer: {type(error).__name__}")
            return 0

    def _failed(self, what: str) -> None:
        # Once per outage: a dead collector fails every batch, and the dropped spans are counted
        # (lmstfy_otlp_spans_dropped_total), so a line each time would only flood the log.
        if not self.failing:
            self.failing = True
            log.warning("tracing: the collector at %s %s; spans are dropped until it answers", self.shown_url, what)
