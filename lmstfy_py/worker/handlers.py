"""Calling a handler: async ones on the event loop, sync ones on threads of their own; finding one
by its `MODULE:CALLABLE` name; and the reason a failure leaves on its job."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from lmstfy_py.client import Job

Handler = Callable[[Job], Any]  # a function or a coroutine function of one Job; what it returns, its result

MAX_REASON_BYTES = 1024  # the server refuses a longer reason


class HandlerExit(Exception):
    """A sync handler raised SystemExit or KeyboardInterrupt."""


class HandlerThreads:
    """A fixed number of daemon threads running a sync handler, each call awaited on the loop.

    Daemon threads, unlike ThreadPoolExecutor's: a handler still running when the worker stopped
    (its job already released to another worker) must not keep the process from exiting, and
    Python cannot interrupt a thread. Results reach the loop in batches: a thread that finishes
    wakes the loop only when no wake-up is pending, so a burst of short handlers costs one
    wake-up (a system call) instead of one per job.
    """

    def __init__(self, handler: Handler, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self._handler = handler
        self._loop = loop
        self._work: SimpleQueue[tuple[asyncio.Future[Any], Job] | None] = SimpleQueue()
        self._done: deque[tuple[asyncio.Future[Any], Any, Exception | None]] = deque()
        self._wakeup_pending = False
        self._threads = [
            threading.Thread(target=self._serve, name=f"lmstfy-handler-{i}", daemon=True) for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def __call__(self, job: Job) -> asyncio.Future[Any]:
        future = self._loop.create_future()
        self._work.put((future, job))
        return future

    def shutdown(self) -> None:
        """Threads end after the handler they run (or at once when idle); none is waited for."""
        for _ in self._threads:
            self._work.put(None)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, job = item
            try:
                self._finished(future, self._handler(job), None)
            except Exception as exc:
                self._finished(future, None, exc)
            except BaseException as exc:
                # sys.exit() or the like inside a handler fails its job, not the worker.
                self._finished(future, None, HandlerExit(f"the handler raised {exc!r}"))

    def _finished(self, future: asyncio.Future[Any], result: Any, failure: Exception | None) -> None:
        self._done.append((future, result, failure))
        if not self._wakeup_pending:
            self._wakeup_pending = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        # Cleared first: a result appended from now on either is drained below or wakes us again.
        self._wakeup_pending = False
        while self._done:
            future, result, failure = self._done.popleft()
            if future.done():  # cancelled: the stop gave its job back
                continue
            if failure is None:
                future.set_result(result)
            else:
                future.set_exception(failure)


def result_body(returned: object) -> bytes | None:
    """A handler's return value as the result its job is completed with: bytes as they are, str as UTF-8,
    anything else as JSON; None: no result (a plain ACK, which Go lmstfy understands too). A value JSON
    cannot encode raises TypeError or ValueError: the handler's failure."""
    if returned is None or isinstance(returned, bytes):
        return returned
    if isinstance(returned, bytearray | memoryview):
        return bytes(returned)
    if isinstance(returned, str):
        return returned.encode()
    return json.dumps(returned, separators=(",", ":"), allow_nan=False).encode()


def is_async(handler: Handler) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__ counts too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def failure_reason(exc: BaseException) -> str:
    """`Kind: message`, cut to what the server keeps (1024 bytes of UTF-8)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return truncate_utf8(text, MAX_REASON_BYTES)


def truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


def where(exc: BaseException) -> str:
    """file:line of the innermost frame that raised, for a one-line log."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"


class HandlerNotFound(Exception):
    pass


def load_handler(spec: str) -> Handler:
    """The callable named `MODULE:NAME` (NAME may be dotted, `module:obj.method`); the current
    directory is importable, as for `python -m`."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HandlerNotFound(f"expected MODULE:CALLABLE, not {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerNotFound(f"cannot import {module_name}: {exc}") from exc
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            raise HandlerNotFound(f"{module_name} has no {attribute}") from None
    if not callable(found):
        raise HandlerNotFound(f"{spec} is not callable")
    return found  # type: ignore[no-any-return]
