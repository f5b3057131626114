"""The worker's optional Prometheus metrics, in a registry of its own (not the server's
multiprocess machinery: a worker is one process), served on --metrics-port."""

from __future__ import annotations

from typing import Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, float("inf"))


class Recorder(Protocol):
    def done(self, queue: str, seconds: float) -> None: ...

    def failed(self, queue: str, seconds: float, action: str) -> None: ...

    def close(self) -> None: ...


class NoMetrics:
    """What the worker records with when --metrics-port is not given: nothing, at no cost."""

    def done(self, queue: str, seconds: float) -> None:
        pass

    def failed(self, queue: str, seconds: float, action: str) -> None:
        pass

    def close(self) -> None:
        pass


class WorkerMetrics:
    """lmstfy_worker_jobs_processed_total{queue}: handlers that returned (their jobs ACKed);
    lmstfy_worker_jobs_failed_total{queue,action}: handlers that raised, action = release or bury;
    lmstfy_worker_job_duration_seconds{queue}: how long handlers ran, whatever their outcome."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.processed = Counter(
            "lmstfy_worker_jobs_processed", "Jobs whose handler returned", ["queue"], registry=self.registry
        )
        self.failed_jobs = Counter(
            "lmstfy_worker_jobs_failed", "Jobs whose handler raised", ["queue", "action"], registry=self.registry
        )
        self.duration = Histogram(
            "lmstfy_worker_job_duration_seconds",
            "Seconds a handler ran",
            ["queue"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._server: WSGIServer | None = None

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        try:
            self._server, _thread = start_http_server(port, host, registry=self.registry)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot serve metrics on port {port}: {exc.strerror}") from exc

    def done(self, queue: str, seconds: float) -> None:
        self.processed.labels(queue).inc()
        self.duration.labels(queue).observe(seconds)

    def failed(self, queue: str, seconds: float, action: str) -> None:
        self.failed_jobs.labels(queue, action).inc()
        self.duration.labels(queue).observe(seconds)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
