"""`Client`: every data-plane route, blocking. Its methods and its send are written once, for
AsyncClient (aio.py) too (methods.py, core.py): here are only its connections, which block."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, TypeVar

import httpcore

from lmstfy_py.client.calls import Call
from lmstfy_py.client.core import Blocking, run_blocking
from lmstfy_py.client.methods import Methods

T = TypeVar("T")


class Client(Methods, Blocking):
    """A client of one namespace of an lmstfy-py (or Go lmstfy) server, over one pool of keep-alive
    connections; thread-safe. Use it as a context manager, or call `close()`. Its parameters: see `__init__`.
    """

    def _connect(self, options: dict[str, Any]) -> None:
        self._pool = httpcore.ConnectionPool(**options)

    async def _request(self, call: Call[Any]) -> httpcore.Response:
        return self._pool.request(**self._endpoint.request(call))

    async def _pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def send(self, call: Call[T]) -> T:
        """Sends `call`, retrying as self.retry allows; its answer as read, or the client's exception."""
        return run_blocking(self._send(call))

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
