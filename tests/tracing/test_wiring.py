"""How the export is switched on (SPEC 15): `[tracing]` and `--otlp-endpoint`, the start without the
[otel] extra, and a server without the option that never imports OpenTelemetry."""

from __future__ import annotations

import base64
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from benchmarks.harness.otlp_receiver import OtlpReceiver
from lmstfy_py.config import ConfigError, TracingConfig, load_config


def test_tracing_section_and_flag(tmp_path: Path) -> None:
    assert load_config(None).tracing == TracingConfig(None, "lmstfy-py")
    path = tmp_path / "c.toml"
    path.write_text('[tracing]\notlp_endpoint = "http://collector:4318"\nservice_name = "queue-eu"\n')
    assert load_config(path).tracing == TracingConfig("http://collector:4318", "queue-eu")
    flagged = load_config(path, otlp_endpoint="https://other:4318/base")
    assert flagged.tracing == TracingConfig("https://other:4318/base", "queue-eu")


@pytest.mark.parametrize("endpoint", ["collector:4318", "ftp://collector", "http://", "http://c:4318/?a=b", ""])
def test_a_bad_endpoint_is_refused_naming_the_flag(endpoint: str) -> None:
    with pytest.raises(ConfigError, match="--otlp-endpoint: "):
        load_config(None, otlp_endpoint=endpoint)


def test_without_the_extra_the_start_stops_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `serve --otlp-endpoint` prints (cli.py: `lmstfy-py: error: ` and the ConfigError, exit 2)."""
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # what an interpreter without it sees
    with pytest.raises(ConfigError) as refused:
        load_config(None, otlp_endpoint="http://c:4318")
    assert str(refused.value) == (
        "command line: --otlp-endpoint: exporting spans needs the [otel] extra: pip install 'lmstfy-py[otel]'"
    )


def test_without_an_endpoint_nothing_of_the_export_is_imported(redis_url: str) -> None:
    """A Runtime started and stopped with every server module imported after the entry point
    (cli.py) loads nothing of OpenTelemetry, the [otel] extra installed (test_export.py's Runtime with
    an endpoint does): neither the export's modules nor what redis-py 8 imports for its own metrics
    (redis_import.py)."""
    script = f"""
import asyncio, sys
import lmstfy_py.cli, lmstfy_py.server, lmstfy_py.tracing, lmstfy_py.web, lmstfy_py.worker
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime

EXPORT = ("opentelemetry", "lmstfy_py.tracing.")

def loaded():
    return sorted(name for name in sys.modules if name.startswith(EXPORT))

async def main():
    config = Config(pools={{"default": PoolConfig("default", url={redis_url!r})}})
    async with Runtime.running(config):
        print(loaded())

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["[]"]


def test_a_bad_endpoint_is_refused_without_repeating_its_credentials() -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, otlp_endpoint="ftp://user:s3cret@collector:4318")
    assert "s3cret" not in str(refused.value)
    assert "--otlp-endpoint: expected an http:// or https:// URL" in str(refused.value)


def test_a_dead_collector_is_logged_once_and_without_its_credentials(caplog: pytest.LogCaptureFixture) -> None:
    from lmstfy_py.tracing.otlp import OtlpHttpExporter

    with socket.socket() as closed:  # a port nothing listens on: each POST is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    exporter = OtlpHttpExporter(f"http://user:s3cret@127.0.0.1:{port}/v1/traces", "svc", ("lmstfy", "1"), 0.5)
    with caplog.at_level(logging.WARNING, logger="lmstfy_py.tracing.otlp"):
        for _ in range(3):
            exporter.export([])
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert "s3cret" not in lines[0] and "did not answer" in lines[0] and f"127.0.0.1:{port}" in lines[0]


def test_a_collector_answering_garbage_fails_the_batch_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """http.client's errors (BadStatusLine here) are no OSError: they escaped the exporter, and the
    SDK's thread logged each with its traceback (the URL's credentials included), counting nothing."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    from lmstfy_py.tracing.otlp import OtlpHttpExporter

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        answering = threading.Thread(target=_answer_garbage, args=(listening, 3), daemon=True)
        answering.start()
        exporter = OtlpHttpExporter(f"http://127.0.0.1:{port}/v1/traces", "svc", ("lmstfy", "1"), 0.5)
        with caplog.at_level(logging.DEBUG):
            results = [exporter.export([]) for _ in range(3)]
        answering.join(5)
    assert results == [SpanExportResult.FAILURE] * 3
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert "did not answer: BadStatusLine" in lines[0]


def _answer_garbage(listening: socket.socket, times: int) -> None:
    for _ in range(times):
        connection, _ = listening.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"this is no HTTP\r\n\r\n")


def test_credentials_in_the_endpoint_are_sent_as_basic_auth() -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from lmstfy_py.tracing.otlp import OtlpHttpExporter

    with OtlpReceiver() as receiver:
        credentialed = receiver.url.replace("http://", "http://us%40er:s3cret@")
        exporter = OtlpHttpExporter(credentialed + "/v1/traces", "svc", ("lmstfy", "1"), 2.0)
        assert exporter.export([]) == SpanExportResult.SUCCESS
    assert receiver.authorizations == ["Basic " + base64.b64encode(b"us@er:s3cret").decode()]
