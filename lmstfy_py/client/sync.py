"""`Client`: every data-plane route, blocking. Its methods and its send are written once, for
AsyncClient (aio.py) too (methods.py, core.py): here are only its connections, which block."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpcore

from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.connection import answer_of
from lmstfy_py.client.core import Blocking, run_blocking
from lmstfy_py.client.events import EventFeed, StreamItem
from lmstfy_py.client.methods import Methods
from lmstfy_py.client.retry import TRANSPORT_ERRORS

T = TypeVar("T")


class Client(Methods, Blocking):
    """A client of one namespace of an lmstfy-py (or Go lmstfy) server, over one pool of keep-alive
    connections; thread-safe. Use it as a context manager, or call `close()`. Its parameters: see `__init__`.
    """

    def _connect(self, options: dict[str, Any]) -> None:
        self._pool = httpcore.ConnectionPool(**options)

    async def _request(self, call: Call[Any]) -> Answer:
        return answer_of(self._pool.request(**self._endpoint.request(call)))

    async def _pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def send(self, call: Call[T]) -> T:
        """Sends `call`, retrying as self.retry allows; its answer as read, or the client's exception."""
        return run_blocking(self._send(call))

    def events(self, queues: str | Sequence[str], after: str | None = None) -> Generator[StreamItem]:
        """The events of a queue (or of 1..16 merged) as they happen (lmstfy-py only, SPEC 13): from now,
        from every kept one (`after="0"`) or after a cursor. A dropped connection or a restarted server
        is reconnected to with the last cursor: no event lost or repeated (an `EventGap` says how many
        the queue trimmed before they were read). Raises `Conflict` when the queue's events are off."""
        feed = EventFeed(self.routes, queues, after, self.retry)
        while True:
            failure: Exception | None = None
            try:
                with self._pool.stream(**self._endpoint.request(feed.call())) as response:
                    if response.status != 200:
                        response.read()
                        failure = feed.refused(answer_of(response))
                    else:
                        feed.opened()
                        for chunk in response.iter_stream():
                            yield from feed.feed(chunk)
            except TRANSPORT_ERRORS as exc:
                failure = exc
            time.sleep(feed.broken(failure))

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
