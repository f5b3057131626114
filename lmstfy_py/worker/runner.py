"""`Worker`: runs a handler for every job of one namespace's queues, `concurrency` at once, until
a stop. What a run does is run.py's; this is the settings, the event loop and the signals."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from lmstfy_py.client import AsyncClient, Job
from lmstfy_py.tracing.propagation import in_job_context
from lmstfy_py.worker.handlers import Handler, HandlerThreads, is_async
from lmstfy_py.worker.metrics import NoMetrics, Recorder, WorkerMetrics
from lmstfy_py.worker.pace import FETCHERS
from lmstfy_py.worker.records import Settings, Tally
from lmstfy_py.worker.run import Run

MAX_COUNT = 100  # the server's largest consume


class Worker:
    """Runs `handler(job)` for the jobs of `queues` (listed first wins) of one namespace.

    `handler` is a function or a coroutine function taking a `Job`: returning None ACKs the job,
    returning a value completes it with that result (bytes as they are, str as UTF-8, else JSON;
    lmstfy-py's complete, readable with `result`), `raise Bury("why")` buries it, any other
    exception releases it with the job's backoff. Sync handlers run on `concurrency` threads, async
    ones on the event loop. `prefetch` jobs more than `concurrency` may be held reserved, waiting
    for a slot (given back untried once they have waited half their ttr, and at a stop); by default
    the buffer follows the handlers' pace: what they finish in two consume round trips, at least the
    concurrency, at most 1200 (pace.py). `ttr` is the reservation of each job (touched while its
    handler runs); `count` caps a consume (default 100, the most the server gives; a consume asks
    for at most the free room); `grace` is what in-flight handlers get at a stop; `poll` the
    long-poll wait in seconds; `metrics_port` serves Prometheus metrics (metrics.py).
    `ack_with_consume` sends the ACKs of finished jobs with the next consume (lmstfy-py's `ack`
    parameter): off, they go only by batch ACK, for a server from before that parameter (which would
    ignore it).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        url: str,
        token: str,
        namespace: str,
        queues: str | Sequence[str],
        concurrency: int = 8,
        prefetch: int | None = None,
        ttr: float = 60.0,
        count: int | None = None,
        grace: float = 30.0,
        poll: int = 2,
        timeout: float = 30.0,
        metrics_port: int | None = None,
        ack_with_consume: bool = True,
    ) -> None:
        self.handler = handler
        self.url, self.token, self.namespace = url, token, namespace
        self.queues = [queues] if isinstance(queues, str) else list(queues)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.ttr = ttr
        self.count = count or MAX_COUNT
        self.grace = grace
        self.poll = poll
        self.timeout = timeout
        self.metrics_port = metrics_port
        self.ack_with_consume = ack_with_consume
        self.tally = Tally()
        self._check()
        self._active: tuple[asyncio.AbstractEventLoop, Run] | None = None
        self._stop_early = False

    def _check(self) -> None:
        if not self.queues or not all(self.queues):
            raise ValueError("give at least one queue")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError("prefetch must not be negative")
        if not 1 <= self.count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}")
        if self.ttr <= 0 or self.grace < 0 or self.timeout <= 0:
            raise ValueError("ttr and timeout must be positive, grace not negative")
        if self.poll < 1:
            raise ValueError("poll must be at least 1 second (0 would poll an empty queue without pause)")

    def run(self) -> None:
        """Runs until SIGTERM/SIGINT or `stop()` (on uvloop where installed)."""
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self.run_async())

    async def run_async(self, *, handle_signals: bool = True) -> None:
        """Runs on the current event loop until `stop()` (or, with `handle_signals` and on the main
        thread, SIGTERM/SIGINT); raises what made it stop if that was not a stop (401, say)."""
        loop = asyncio.get_running_loop()
        metrics: Recorder = NoMetrics()
        if self.metrics_port is not None:
            metrics = served = WorkerMetrics()
            served.serve(self.metrics_port)
        handler = in_job_context(self.handler, is_async(self.handler))  # its spans: children of the producer's
        threads = None if is_async(self.handler) else HandlerThreads(handler, self.concurrency, loop)
        call: Callable[[Job], Awaitable[Any]] = threads or handler
        try:
            async with contextlib.AsyncExitStack() as clients:
                client, *consumers = [await clients.enter_async_context(self._client()) for _ in range(1 + FETCHERS)]
                run = Run(self._settings(), client, consumers, call, metrics, self.tally)
                self._active = (loop, run)
                if self._stop_early:
                    run.request_stop()
                with _signals(run.request_stop, handle_signals):
                    await run.run()
        finally:
            self._active, self._stop_early = None, False
            metrics.close()
            if threads is not None:
                threads.shutdown()

    def _client(self) -> AsyncClient:
        return AsyncClient(self.url, self.namespace, self.token, timeout=self.timeout, retries=0)

    def _settings(self) -> Settings:
        return Settings(
            self.namespace,
            self.queues,
            self.concurrency,
            self.prefetch,
            self.ttr,
            self.count,
            self.grace,
            self.poll,
            self.timeout,
            is_async(self.handler),
            self.ack_with_consume,
        )

    def stop(self) -> None:
        """Asks the worker to stop, from any thread; a second call skips what is left of the grace."""
        active = self._active
        if active is None:
            self._stop_early = True
            return
        loop, run = active
        if _running_loop() is loop:
            run.request_stop()
        else:
            loop.call_soon_threadsafe(run.request_stop)


@contextlib.contextmanager
def _signals(stop: Callable[[], None], wanted: bool) -> Iterator[None]:
    """SIGTERM and SIGINT ask for a stop while the worker runs (main thread only: Python's rule)."""
    loop = asyncio.get_running_loop()
    handled = []
    if wanted and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
            handled.append(sig)
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
