"""Calling a handler: async ones on the event loop, sync ones on threads of their own; finding one
by its `MODULE:CALLABLE` name; and the reason a failure leaves on its job."""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import os
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from queue import SimpleQueue
from typing import Any, TypeVar

from lmstfy_py.client import Job

T = TypeVar("T")
Handler = Callable[[Job], Any]  # a function or a coroutine function of one Job; what it returns is ignored

MAX_REASON_BYTES = 1024  # the server refuses a longer reason


class HandlerExit(Exception):
    """A sync handler raised SystemExit or KeyboardInterrupt."""


class HandlerThreads(Executor):
    """A fixed number of daemon threads running sync handlers.

    Daemon threads, unlike ThreadPoolExecutor's: a handler still running when the worker stopped
    (its job already released to another worker) must not keep the process from exiting, and
    Python cannot interrupt a thread.
    """

    def __init__(self, size: int) -> None:
        self._work: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"lmstfy-handler-{i}", daemon=True) for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._work.put((future, functools.partial(fn, **kwargs) if kwargs else fn, args))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in self._threads:
            self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def busy(self) -> int:
        """Threads still running a handler (after shutdown: those that did not end)."""
        return sum(thread.is_alive() for thread in self._threads)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except Exception as exc:
                future.set_exception(exc)
            except BaseException as exc:
                # sys.exit() or the like inside a handler fails its job, not the worker.
                future.set_exception(HandlerExit(f"the handler raised {exc!r}"))


def is_async(handler: Handler) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__ counts too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def invoker(handler: Handler, threads: HandlerThreads | None) -> Callable[[Job], Awaitable[Any]]:
    """An awaitable call of `handler`: on the loop if it is async, else on `threads`."""
    if is_async(handler):
        return handler
    assert threads is not None
    loop = asyncio.get_running_loop()
    return lambda job: loop.run_in_executor(threads, handler, job)


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
