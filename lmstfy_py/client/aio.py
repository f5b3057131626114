"""`AsyncClient`: the asyncio twin of `Client` (sync.py). Its methods and its send are written once,
for both (methods.py, core.py): here are only its connections, which are awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpcore

from lmstfy_py.client.asyncio_backend import AsyncioBackend
from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.connection import KEEPALIVE_EXPIRY_S, MAX_CONNECTIONS, answer_of
from lmstfy_py.client.core import Awaiting
from lmstfy_py.client.events import EventFeed, StreamItem
from lmstfy_py.client.http11 import Connections
from lmstfy_py.client.methods import Methods
from lmstfy_py.client.retry import TRANSPORT_ERRORS

T = TypeVar("T")


class AsyncClient(Methods, Awaiting):
    """Client's methods, awaited: a client of one namespace over one pool of keep-alive connections,
    for one event loop. Use it as an async context manager, or await `close()`. Its parameters: see `__init__`.
    """

    def _connect(self, options: dict[str, Any]) -> None:
        end = self._endpoint
        self._connections = Connections(
            end.scheme, end.host, end.port, options["ssl_context"], MAX_CONNECTIONS, KEEPALIVE_EXPIRY_S
        )
        # Event streams only: an answer read as it comes, for as long as the stream is open.
        self._pool = httpcore.AsyncConnectionPool(**options, network_backend=AsyncioBackend())

    async def _request(self, call: Call[Any]) -> Answer:
        return await self._connections.send(self._endpoint.request_bytes(call), self._endpoint.timeouts(call))

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def send(self, call: Call[T]) -> T:
        """Sends `call`, retrying as self.retry allows; its answer as read, or the client's exception."""
        return await self._send(call)

    async def events(self, queues: str | Sequence[str], after: str | None = None) -> AsyncGenerator[StreamItem]:
        """Client.events (sync.py), iterated with `async for`."""
        feed = EventFeed(self.routes, queues, after, self.retry)
        while True:
            failure: Exception | None = None
            try:
                async with self._pool.stream(**self._endpoint.request(feed.call())) as response:
                    if response.status != 200:
                        await response.aread()
                        failure = feed.refused(answer_of(response))
                    else:
                        feed.opened()
                        async for chunk in response.aiter_stream():
                            for item in feed.feed(chunk):
                                yield item
            except TRANSPORT_ERRORS as exc:
                failure = exc
            await asyncio.sleep(feed.broken(failure))

    async def close(self) -> None:
        self._connections.close()
        await self._pool.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
