"""The span export in one process (SPEC 15, "Export"): TracedSteps in, spans decoded by a real OTLP/HTTP
receiver out; with a collector that never answers, a Runtime's requests wait for nothing and the
overflow is counted."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.harness.otlp_receiver import KIND_CONSUMER, KIND_PRODUCER, OtlpReceiver, ReceivedSpan, silent_collector
from lmstfy_py import metrics
from lmstfy_py.config import Config, PoolConfig, TracingConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.engine_base import TracedKind, TracedStep
from lmstfy_py.tracing import exporting
from lmstfy_py.tracing.bounded import BATCH, EXPORT_TIMEOUT_S, MAX_WAITING
from lmstfy_py.types import TraceContext
from lmstfy_py.web import create_admin_app, create_data_app
from tests.conftest import client_for

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SAMPLED = TraceContext(f"00-{TRACE_ID}-{PARENT_ID}-01", "vendor=value")
SAMPLED_HEADER = {"traceparent": SAMPLED.traceparent}
UNSAMPLED = TraceContext(f"00-{'1' * 32}-{'2' * 16}-00")


def step(kind: TracedKind, job_id: str = "job-1", trace: TraceContext = SAMPLED) -> TracedStep:
    now = time.time_ns()
    return TracedStep(kind, "default", "ns1", "q1", job_id, trace, now - 1_000_000, now)


def dropped(reason: str) -> float:
    metrics.flush()
    text = metrics.exposition().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lmstfy_otlp_spans_dropped_total" and sample.labels == {"reason": reason}:
                return sample.value
    return 0.0


@pytest.fixture
def receiver() -> OtlpReceiver:
    with OtlpReceiver() as running:
        yield running


def named(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    return next(span for span in spans if span.name == name)


async def test_each_step_arrives_as_a_span_of_the_jobs_trace_within_2_s(receiver: OtlpReceiver) -> None:
    async with exporting(TracingConfig(receiver.url + "/", "svc-test")) as export:
        assert export is not None
        steps = [step("publish"), step("consume"), step("ack")]
        sent = time.monotonic()
        for each in steps:
            export.traced(each)
        spans = await asyncio.to_thread(receiver.wait_for, lambda spans: len(spans) >= 3)
    assert max(span.received_at for span in spans) - sent < 2.0
    assert receiver.content_types[0] == "application/x-protobuf"
    for each in steps:
        span = named(spans, "lmstfy." + each.kind)
        assert (span.trace_id, span.parent_id) == (TRACE_ID, PARENT_ID)
        assert (span.start_ns, span.end_ns) == (each.start_ns, each.end_ns)
        assert span.service == "svc-test"
        assert span.attributes == {
            "messaging.system": "lmstfy",
            "messaging.destination.name": "q1",
            "messaging.message.id": "job-1",
            "lmstfy.namespace": "ns1",
            "lmstfy.pool": "default",
        }
    assert named(spans, "lmstfy.publish").kind == KIND_PRODUCER
    assert named(spans, "lmstfy.ack").kind == KIND_CONSUMER
    assert len({span.span_id for span in spans}) == 3


async def test_an_unsampled_trace_exports_nothing(receiver: OtlpReceiver) -> None:
    async with exporting(TracingConfig(receiver.url)) as export:
        assert export is not None
        export.traced(step("publish", "unsampled", UNSAMPLED))
        export.traced(step("publish", "sampled"))
        spans = await asyncio.to_thread(receiver.wait_for, lambda spans: len(spans) >= 1)
    assert [span.attributes["messaging.message.id"] for span in spans] == ["sampled"]
    assert spans[0].service == "lmstfy-py"


BULK_BODY = b"[" + b"1," * 63 + b"1]"  # 64 jobs: 64 publish spans
BULKS = (MAX_WAITING + BATCH) // 64 + 4


async def test_with_a_dead_collector_every_request_answers_at_once_and_the_overflow_is_counted(redis_url: str) -> None:
    """The Runtime's wiring: bulk publishes of sampled jobs, each a span, against a collector that never
    answers; no request waits for it, and past 2,048 waiting spans they are dropped and counted."""
    before = dropped("queue_full")
    headers = {"X-Token": "", **SAMPLED_HEADER}
    with silent_collector() as url:
        config = Config(pools={"default": PoolConfig("default", url=redis_url)}, tracing=TracingConfig(url))
        async with (
            Runtime.running(config, run_pumps=False) as runtime,
            client_for(create_admin_app(runtime)) as admin,
            client_for(create_data_app(runtime)) as data,
        ):
            headers["X-Token"] = (await admin.post("/token/ns", params={"description": "t"})).json()["token"]
            slowest = 0.0
            for _ in range(BULKS):
                started = time.monotonic()
                answer = await data.put("/api/ns/q/bulk", content=BULK_BODY, headers=headers)
                slowest = max(slowest, time.monotonic() - started)
                assert answer.status_code == 201, answer.text
    # Past MAX_WAITING waiting spans each is dropped; the export thread may hold one batch it took.
    spans = 64 * BULKS
    assert spans - MAX_WAITING - BATCH <= dropped("queue_full") - before <= spans - MAX_WAITING
    assert slowest < EXPORT_TIMEOUT_S  # none waited for the collector's answer (each would take this long)
