"""A real OTLP/HTTP collector on loopback for tests and benchmarks, and one that never answers.

`OtlpReceiver` serves POST /v1/traces on a free port from its own thread, decodes every body with
opentelemetry-proto's ExportTraceServiceRequest (what a collector does) and records each span;
`wait_for` returns them once enough arrived. `SilentCollector` accepts connections and never
replies: a collector that hangs.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

TRACES_PATH = "/v1/traces"
# OTLP's SpanKind numbers (opentelemetry-proto), as they arrive.
KIND_PRODUCER = 4
KIND_CONSUMER = 5


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str  # 16 hex digits, "" for a root span
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    service: str  # the resource's service.name
    received_at: float  # time.monotonic() when its POST arrived


def _values(attributes: Any) -> dict[str, Any]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value") or "string_value") for a in attributes}


def decode(body: bytes, received_at: float) -> list[ReceivedSpan]:
    """The spans of one POST /v1/traces body."""
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_values(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        span.name,
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.kind,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        _values(span.attributes),
                        service,
                        received_at,
                    )
                )
    return spans


class OtlpReceiver:
    """Records every span POSTed to `url` + /v1/traces; `content_types` those of the POSTs."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.content_types: list[str] = []
        self.authorizations: list[str | None] = []  # each POST's Authorization header
        self.changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.authorizations.append(self.headers.get("Authorization"))
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                receiver.record(self.headers.get("Content-Type", ""), decode(body, time.monotonic()))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests read the spans, not the log

        return Handler

    def record(self, content_type: str, spans: list[ReceivedSpan]) -> None:
        with self.changed:
            self.content_types.append(content_type)
            self.spans += spans
            self.changed.notify_all()

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout: float = 5.0) -> list[ReceivedSpan]:
        """The spans received once `found(spans)` holds; AssertionError after `timeout` seconds."""
        with self.changed:
            if not self.changed.wait_for(lambda: found(self.spans), timeout):
                raise AssertionError(f"within {timeout} s the receiver got only {[s.name for s in self.spans]}")
            return list(self.spans)

    def clear(self) -> None:
        with self.changed:
            self.spans.clear()
            self.content_types.clear()

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="otlp-receiver", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def silent_collector() -> Iterator[str]:
    """The URL of a collector that accepts every connection and never answers (nor closes one)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, name="silent-collector", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
        for connection in held:
            connection.close()
