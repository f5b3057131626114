"""Run the server: both apps in one event loop per process, and `--workers N` processes.

One process (`run_worker`) runs the data app and the admin app as two HTTP servers in one event
loop around one Runtime: uvicorn (uvicorn_serve.py, the default where the [fast] extra is
installed), or hypercorn (hypercorn_serve.py; the same guarantees, tested the same), and stops
gracefully on SIGTERM or SIGINT: answer waiting long-polls, stop accepting, answer every request
that has arrived, each with `Connection: close` (up to GRACEFUL_TIMEOUT), then stop the runtime.

With several workers (`run` with workers > 1) this process reserves the addresses, forks the
workers before any event loop exists (each listens on its own socket, see listeners.py), and
supervises: a stop signal is forwarded to every worker, and a worker that dies on its own
stops the rest (a supervisor such as systemd restarts the whole server; half a server that
silently lost a worker is worse than a clear exit 1).

The caller (cli.py) owns what outlives the workers: the listening sockets and the embedded
Redis, which must be started from the main thread (see store/embedded.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterable
from types import FrameType
from typing import TYPE_CHECKING, cast

from starlette.types import ASGIApp

import lmstfy_py.redis_import  # noqa: F401  # first: redis-py without OpenTelemetry (see there)
from lmstfy_py import __version__, logs, metrics
from lmstfy_py.config import Config, ServerConfig
from lmstfy_py.listeners import BACKLOG, Listeners, url_of
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.embedded import parent_death_hook
from lmstfy_py.web import create_admin_app, create_data_app
from lmstfy_py.web.hot import HotRoutes

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig

GRACEFUL_TIMEOUT = 5.0
# Beyond the graceful timeout: hypercorn's own closing steps, then our cancel fallback.
STOP_MARGIN = 2.0
GC_GEN0_THRESHOLD = 50_000
# A worker gets its graceful timeout plus the runtime's stop before the supervisor kills it.
WORKER_STOP_TIMEOUT = GRACEFUL_TIMEOUT + 3 * STOP_MARGIN
SUPERVISE_POLL_S = 0.5
# A SIGINT ignored when we were started (a background job of a shell script) stays ignored.
STOP_SIGNALS = (
    (signal.SIGTERM,) if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else (signal.SIGTERM, signal.SIGINT)
)

log = logging.getLogger(__name__)
# Says one line of the server's own, in the configured log format (cli.py's _say).
Announce = Callable[[str], None]


def startup_line(config: Config, listeners: Listeners, redis: str) -> str:
    workers = config.server.workers
    return (
        f"lmstfy-py {__version__}: data {url_of(listeners.data)}, admin {url_of(listeners.admin)}, "
        f"redis {redis}, {workers} worker{'s' if workers > 1 else ''} ({config.server.http_server})"
    )


# Set by stop_from_another_thread: its SIGTERM is the server's own (the embedded Redis is lost),
# which the stop line must not blame on someone outside.
_stopping_itself = threading.Event()


def stopping_line(sig: int) -> str:
    cause = "" if _stopping_itself.is_set() else f"{signal.Signals(sig).name} received: "
    return f"lmstfy-py: {cause}stopping, requests in flight get up to {GRACEFUL_TIMEOUT:g}s"


def exposure_warning(config: Config, listeners: Listeners) -> str | None:
    """A warning when anyone on the network could mint tokens: admin port not loopback, no accounts."""
    host = listeners.admin.getsockname()[0]
    if config.accounts or config.readonly_accounts or ipaddress.ip_address(host.split("%")[0]).is_loopback:
        return None
    return (
        f"lmstfy-py: warning: the admin API listens on {url_of(listeners.admin)} with no [admin.accounts]: "
        "anyone who can reach it can create tokens; configure accounts or use --admin-host 127.0.0.1"
    )


# -- one server process ------------------------------------------------------------------


def hypercorn_config(server: ServerConfig) -> HypercornConfig:
    """One server's config: hypercorn_serve.serve changes it when the server stops."""
    from hypercorn.config import Config as HypercornConfig

    config = HypercornConfig()
    config.backlog = BACKLOG
    config.graceful_timeout = GRACEFUL_TIMEOUT
    # Also the time a request's head may take; the body's is RequestBodyMiddleware's body_timeout.
    config.keep_alive_timeout = server.keep_alive_timeout
    # Ours (web/accesslog.py) is switched at run time by POST /accesslog: hypercorn's stays off for good.
    config.accesslog = None
    # A Logger is used as is: its "Running on ..." INFO lines would repeat our start-up line.
    error_log = logging.getLogger("hypercorn.error")
    error_log.setLevel(logging.WARNING)
    config.errorlog = error_log
    return config


async def serve(config: Config, listeners: Listeners, shutdown: asyncio.Event, worker: int = 0) -> None:
    """Serve both apps on `listeners` until `shutdown` is set, then stop gracefully.

    `worker` is this process's number among the server's workers (its process metrics' label).
    """
    if not logs.configured():  # the CLI sets them up before it forks; an embedding caller may not
        logs.setup(config.log)
    metrics.register_process(str(worker))
    async with Runtime.running(config) as runtime:
        servers = [
            # The hot data routes skip the app's stack and router (web/hot.py); the rest is the app's.
            _start_server("data-server", HotRoutes(create_data_app(runtime)), listeners.data, config, shutdown),
            _start_server("admin-server", create_admin_app(runtime), listeners.admin, config, shutdown),
        ]
        _tune_gc()  # after the apps and the HTTP server's modules (imported by serve_app) are made
        stopping = asyncio.create_task(_answer_long_polls_on(shutdown, runtime))
        await _until_stopped(servers, shutdown)
        await asyncio.wait([stopping], timeout=STOP_MARGIN)


def _tune_gc() -> None:
    # Start-up objects (modules, apps, the runtime) live for ever: frozen, the collector
    # stops re-scanning them. Not what comes later: aiohttp imported after the freeze (with the
    # first push group, an experiment) cost each push delivery ~12 % more server CPU, so the apps
    # and the HTTP server's modules come first. Requests allocate many short-lived objects, and with the
    # default gen-0 threshold (700) full passes run often enough to delay timers and
    # long-poll wake-ups by several ms; this measured p99 timer lateness 1-2 ms lower.
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 100)


async def _answer_long_polls_on(shutdown: asyncio.Event, runtime: Runtime) -> None:
    # Waiting long-polls get "no job available" at once, so in-flight requests end well
    # within the graceful timeout instead of being cut off by it.
    await shutdown.wait()
    await runtime.stop_waiting()


def _start_server(
    name: str, app: ASGIApp, sock: socket.socket, config: Config, shutdown: asyncio.Event
) -> asyncio.Task[None]:
    return asyncio.create_task(serve_app(app, config.server, sock, shutdown), name=name)


def serve_app(
    app: ASGIApp, server: ServerConfig, sock: socket.socket, shutdown: asyncio.Event
) -> Coroutine[None, None, None]:
    """`app` served on `sock` by the server's HTTP server until `shutdown`, then stopped gracefully."""
    # Each imported only when chosen (uvicorn is an optional dependency; hypercorn took ~0.2 s more
    # to start a server that does not use it).
    if server.http_server == "uvicorn":
        from lmstfy_py import uvicorn_serve

        return uvicorn_serve.serve(uvicorn_serve.uvicorn_config(app, server, int(GRACEFUL_TIMEOUT)), sock, shutdown)
    from hypercorn.typing import ASGIFramework

    from lmstfy_py import hypercorn_serve

    # Starlette's ASGI types and hypercorn's are equivalent but spelled differently.
    return hypercorn_serve.serve(cast(ASGIFramework, app), hypercorn_config(server), sock, shutdown)


async def _until_stopped(servers: list[asyncio.Task[None]], shutdown: asyncio.Event) -> None:
    """Wait for `shutdown` (or a server failing), then for both servers' graceful stop, bounded."""
    stop = asyncio.create_task(shutdown.wait())
    try:
        await asyncio.wait([*servers, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        shutdown.set()  # one server failing stops the other: half a server is no server
        stop.cancel()
    _, pending = await asyncio.wait(servers, timeout=GRACEFUL_TIMEOUT + STOP_MARGIN)
    # Cancel is only the fallback: on Python < 3.12 a cancel can be swallowed (gh-86296), so bounded again.
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=STOP_MARGIN)
        log.warning("%s did not stop within %gs", ", ".join(t.get_name() for t in pending), GRACEFUL_TIMEOUT)
    for task in servers:
        error = task.exception() if task.done() and not task.cancelled() else None
        if error is not None:
            raise error


def _stop_asked(sig: signal.Signals, shutdown: asyncio.Event, announce: Announce | None) -> None:
    if announce is not None and not shutdown.is_set():  # a second Ctrl-C is no news
        announce(stopping_line(sig))
    shutdown.set()


async def _serve_until_signalled(config: Config, listeners: Listeners, worker: int, announce: Announce | None) -> None:
    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _stop_asked, sig, shutdown, announce)
    loop.add_signal_handler(signal.SIGUSR1, logs.reopen)
    try:
        await serve(config, listeners, shutdown, worker)
    finally:
        # Removing a loop handler resets SIGTERM to "die at once"; a stop signal landing in that
        # gap (the supervisor forwards one right after a Ctrl-C) would kill us with code -15.
        handled = (*STOP_SIGNALS, signal.SIGUSR1)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, handled)
        try:
            for sig in handled:
                loop.remove_signal_handler(sig)
            sigterm_interrupts()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_worker(config: Config, listeners: Listeners, worker: int = 0, announce: Announce | None = None) -> None:
    """Serve in this process until SIGTERM or SIGINT (blocking); `announce` says when a stop begins.

    A stop signal after the loop is done raises KeyboardInterrupt (see sigterm_interrupts).
    """
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_serve_until_signalled(config, listeners, worker, announce))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_from_another_thread() -> None:
    """Stop this server gracefully, as a SIGTERM from outside would: the main thread takes it,
    whether it runs the event loop (one worker) or supervises workers."""
    _stopping_itself.set()
    os.kill(os.getpid(), signal.SIGTERM)


def sigterm_interrupts() -> None:
    """Outside an event loop, SIGTERM and SIGINT raise KeyboardInterrupt, so `finally` blocks
    (stopping the embedded Redis) still run; SIGUSR1 (logrotate's, as lmstfy) reopens the log files
    instead of killing the server."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    signal.signal(signal.SIGUSR1, _reopen_logs)


def _reopen_logs(signum: int, frame: FrameType | None) -> None:
    logs.reopen()


# -- several worker processes ------------------------------------------------------------


def run(config: Config, listeners: Listeners, announce: Announce | None = None) -> int:
    """Serve with config.server.workers processes until a stop signal; the exit code.

    `announce` says, once per server (not per worker), that a stop signal was taken.
    """
    # Before any fork: every worker writes its metrics to this directory, and any one scrape merges them all.
    metrics_dir, owner = metrics.new_directory(), os.getpid()
    try:
        if config.server.workers == 1:
            run_worker(config, listeners, announce=announce)
            return 0
        return _supervise(config, listeners, announce)
    finally:
        metrics.remove_directory(metrics_dir, owner)


def _supervise(config: Config, listeners: Listeners, announce: Announce | None) -> int:
    # Signals are blocked and taken with sigtimedwait: no handler can interrupt a fork or a reap.
    watched = {*STOP_SIGNALS, signal.SIGCHLD, signal.SIGUSR1}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    workers: set[int] = set()
    try:
        for index in range(config.server.workers):
            workers.add(_fork_worker(config, listeners, old_mask, index))
        return _watch(workers, watched, announce)
    finally:
        _kill_all(workers, signal.SIGKILL)  # none are left unless we leave by an exception
        for pid in workers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _fork_worker(config: Config, listeners: Listeners, mask: Iterable[int], index: int) -> int:
    die_with_parent = parent_death_hook()
    # Buffered output would otherwise be written twice, once by each process.
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        if die_with_parent is not None:
            die_with_parent()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        run_worker(config, listeners.for_this_worker(), index)
        code = 0
    except KeyboardInterrupt:
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        # Never return into the parent's code (the CLI would stop the embedded Redis twice).
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _watch(workers: set[int], watched: set[signal.Signals], announce: Announce | None) -> int:
    """Wait for a stop signal or a worker's death, stop every worker (bounded); the exit code."""
    deadline: float | None = None
    failed = False
    while workers:
        received = signal.sigtimedwait(watched, SUPERVISE_POLL_S)
        if received is not None and received.si_signo == signal.SIGUSR1:
            logs.reopen()  # the supervisor's own lines, then every worker's
            _kill_all(workers, signal.SIGUSR1)
        # The stop signal first: a Ctrl-C reaches the workers too, and they may exit before we look.
        if deadline is None and received is not None and received.si_signo in STOP_SIGNALS:
            if announce is not None:
                announce(stopping_line(received.si_signo))
            deadline = _stop_all(workers)
        for pid, code in _reap(workers).items():
            # Before a stop was asked for, any exit is a failure, even a clean one.
            if code != 0 or deadline is None:
                print(f"lmstfy-py: worker {pid} exited with code {code}", file=sys.stderr)
                failed = True
        if deadline is None and failed:
            deadline = _stop_all(workers)
        elif deadline is not None and time.monotonic() > deadline:
            print(f"lmstfy-py: killing workers {sorted(workers)} after {WORKER_STOP_TIMEOUT:g}s", file=sys.stderr)
            _kill_all(workers, signal.SIGKILL)
            deadline = float("inf")
            failed = True
    return 1 if failed else 0


def _reap(workers: set[int]) -> dict[int, int]:
    """Exit codes of the workers that have exited, removed from `workers`.

    Only our workers' pids are waited for: waitpid(-1) would also reap the embedded Redis,
    a child of this process too, behind its Popen's back.
    """
    codes: dict[int, int] = {}
    for pid in list(workers):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done:
            codes[pid] = os.waitstatus_to_exitcode(status)
            workers.discard(pid)
    return codes


def _stop_all(workers: set[int]) -> float:
    """Ask every worker to stop gracefully; the time by which they must be gone."""
    _kill_all(workers, signal.SIGTERM)
    return time.monotonic() + WORKER_STOP_TIMEOUT


def _kill_all(workers: set[int], sig: signal.Signals) -> None:
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
