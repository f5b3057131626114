"""SPEC 15's export end to end: one `lmstfy-py serve --otlp-endpoint` (two worker processes, each
exporting from its own thread started after the fork) and a real OTLP/HTTP receiver; the Python
client and worker carry the trace from a producer's span to the handler's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from benchmarks.harness.lmstfy_servers import Server
from benchmarks.harness.otlp_receiver import KIND_CONSUMER, KIND_PRODUCER, OtlpReceiver, ReceivedSpan
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.client import Client, Job
from lmstfy_py.worker import Worker
from tests.fixtures.module_server import client, namespace, token
from tests.worker.conftest import running, wait_until

__all__ = ["client", "namespace", "token"]  # module_server.py's fixtures, on this module's server


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running_receiver:
        yield running_receiver


@pytest.fixture(scope="module")
def lmstfy_server(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisProcess, receiver: OtlpReceiver
) -> Iterator[Server]:
    """The module's server, exporting to the receiver; module_server.py's fixtures make its tokens and clients."""
    redis_server.start()  # a fault test before may have left it stopped
    redis_server.flushall()
    args = ["--otlp-endpoint", receiver.url, "--workers", "2"]
    with Server(tmp_path_factory.mktemp("tracing"), redis_url=redis_server.url, args=args) as running_server:
        yield running_server.start()


def new_traceparent(flags: str = "01") -> tuple[str, str, str]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent_id}-{flags}", trace_id, parent_id


def spans_of(receiver: OtlpReceiver, trace_id: str, names: set[str]) -> dict[str, ReceivedSpan]:
    """The spans of the trace once every one named arrived (within 2 s of the last step: SPEC 15)."""
    spans = receiver.wait_for(lambda got: names <= {s.name for s in got if s.trace_id == trace_id}, timeout=2.5)
    return {span.name: span for span in spans if span.trace_id == trace_id}


def test_publish_consume_ack_arrive_as_spans_of_the_jobs_trace(
    receiver: OtlpReceiver, client: Client, namespace: str
) -> None:
    traceparent, trace_id, parent_id = new_traceparent()
    job_id = client.publish("q", "x", traceparent=traceparent)
    job = client.consume("q", ttr=30)
    assert job is not None and job.traceparent == traceparent
    client.ack("q", job_id)
    spans = spans_of(receiver, trace_id, {"lmstfy.publish", "lmstfy.consume", "lmstfy.ack"})
    assert receiver.content_types[0] == "application/x-protobuf"
    for span in spans.values():
        assert span.parent_id == parent_id and span.service == "lmstfy-py"
        assert span.attributes == {
            "messaging.system": "lmstfy",
            "messaging.destination.name": "q",
            "messaging.message.id": job_id,
            "lmstfy.namespace": namespace,
            "lmstfy.pool": "default",
        }
    assert spans["lmstfy.publish"].kind == KIND_PRODUCER
    assert spans["lmstfy.consume"].kind == spans["lmstfy.ack"].kind == KIND_CONSUMER
    assert spans["lmstfy.publish"].end_ns <= spans["lmstfy.consume"].start_ns


def test_release_bury_complete_and_dead_arrive_too(receiver: OtlpReceiver, client: Client) -> None:
    traceparent, trace_id, _ = new_traceparent()
    released = client.publish("q", "r", traceparent=traceparent, tries=3)
    completed = client.publish("q", "c", traceparent=traceparent)
    buried = client.publish("q", "b", traceparent=traceparent)
    dying = client.publish("d", "d", traceparent=traceparent, tries=1)
    jobs = {job.id for job in client.consume_many("q", 3, ttr=30)}
    assert jobs == {released, completed, buried}
    client.release("q", released, delay=0)
    client.complete("q", completed, result="ok")
    client.bury("q", buried, reason="bad")
    assert client.consume("d", ttr=30) is not None
    client.release("d", dying)  # no try left: dead
    names = {"lmstfy.release", "lmstfy.complete", "lmstfy.bury", "lmstfy.dead"}
    spans = spans_of(receiver, trace_id, names)
    ids = {name: spans[name].attributes["messaging.message.id"] for name in names}
    assert ids == {
        "lmstfy.release": released,
        "lmstfy.complete": completed,
        "lmstfy.bury": buried,
        "lmstfy.dead": dying,
    }


def test_an_unsampled_traceparent_exports_nothing(receiver: OtlpReceiver, client: Client) -> None:
    unsampled, unsampled_trace, _ = new_traceparent("00")
    client.publish("q", "u", traceparent=unsampled)
    job = client.consume("q", ttr=30)
    assert job is not None and job.traceparent == unsampled  # kept and returned all the same
    client.ack("q", job.id)
    sampled, sampled_trace, _ = new_traceparent()
    client.publish("q", "s", traceparent=sampled)
    spans_of(receiver, sampled_trace, {"lmstfy.publish"})  # sent after the unsampled steps
    assert not [span for span in receiver.spans if span.trace_id == unsampled_trace]


def test_one_trace_from_the_producer_through_the_server_to_the_handler(
    receiver: OtlpReceiver, lmstfy_server: Server, client: Client, namespace: str, token: str
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=receiver.url + "/v1/traces")))
    tracer = provider.get_tracer("app")
    handled: list[str] = []

    def handler(job: Job) -> None:
        with tracer.start_as_current_span("handle"):
            handled.append(job.id)

    with tracer.start_as_current_span("produce") as produce:
        job_id = client.publish("w", "work")  # the current span's context, sent by the client
    trace_id, produce_id = f"{produce.get_span_context().trace_id:032x}", f"{produce.get_span_context().span_id:016x}"
    worker = Worker(handler, url=lmstfy_server.data_url, token=token, namespace=namespace, queues="w", poll=1, grace=5)
    with running(worker):
        wait_until(lambda: handled == [job_id], what="the job handled")
    spans = spans_of(receiver, trace_id, {"produce", "lmstfy.publish", "lmstfy.consume", "handle"})
    assert spans["lmstfy.publish"].parent_id == spans["handle"].parent_id == produce_id
    assert spans["handle"].service == "app" and spans["lmstfy.consume"].service == "lmstfy-py"
    provider.shutdown()
