"""A queue's event stream for both clients (SPEC 13 Stream, lmstfy-py only): what `events()` yields,
the Server-Sent Events parser, and the resuming that both faces share.

`Client.events` (sync.py) and `AsyncClient.events` (aio.py) only move bytes: each opens the stream
with httpcore's streaming response, hands every chunk to an `EventFeed` and, when the connection
drops or the server ends the stream (a restart), opens it again as the feed says: with the last
cursor seen as `Last-Event-ID`, so that no event is lost or repeated, after the retry policy's
backoff while the server cannot be reached.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.errors import LmstfyError, Unavailable
from lmstfy_py.client.retry import RetryPolicy, transport_failure
from lmstfy_py.client.routes import Routes


@dataclass(frozen=True, slots=True)
class QueueEvent:
    """One change of a job: `kind` (published, reserved, completed...), and its JSON object's fields
    (`reason` for released, buried and dead; `priority` for published) in `fields`. `cursor` is the
    stream's id of it: `events(after=cursor)` goes on after it."""

    cursor: str
    kind: str
    job_id: str
    queue: str
    ts_ms: int
    attempt: int
    fields: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class EventGap:
    """`lost` events of `queue` were trimmed (the queue keeps only its last `events`) before they were read."""

    queue: str
    lost: int


StreamItem = QueueEvent | EventGap


@dataclass(slots=True)
class _Frame:
    cursor: str | None = None
    kind: str = "message"
    data: list[str] = field(default_factory=list)


class SseParser:
    """Server-Sent Events from the bytes of a response, whatever their chunking (the WHATWG rules
    lmstfy-py's streams need: `id`, `event`, `data` fields, comments, LF or CRLF line ends)."""

    def __init__(self) -> None:
        self._pending = b""
        self._frame = _Frame()

    def feed(self, chunk: bytes) -> list[StreamItem]:
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        found = []
        for raw in lines:
            item = self._line(raw.rstrip(b"\r").decode())
            if item is not None:
                found.append(item)
        return found

    def _line(self, line: str) -> StreamItem | None:
        if not line:
            frame, self._frame = self._frame, _Frame()
            return item_of(frame) if frame.data else None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            self._frame.cursor = value
        elif name == "event":
            self._frame.kind = value
        elif name == "data":
            self._frame.data.append(value)
        return None  # a comment (the server's idle heartbeat) or a field we do not use


def item_of(frame: _Frame) -> StreamItem:
    fields = json.loads("\n".join(frame.data))
    if frame.kind == "gap":
        return EventGap(str(fields["queue"]), int(fields["lost"]))
    return QueueEvent(
        frame.cursor or "",
        frame.kind,
        str(fields["job_id"]),
        str(fields["queue"]),
        int(fields["ts_ms"]),
        int(fields["attempt"]),
        fields,
    )


class EventFeed:
    """One `events()` iteration: where the stream is, the request that goes on from there, and
    whether a broken stream is opened again."""

    def __init__(self, routes: Routes, queues: str | Sequence[str], after: str | None, retry: RetryPolicy) -> None:
        self._routes = routes
        self._queues = [queues] if isinstance(queues, str) else list(queues)
        self.cursor = after  # the last event's id once one came
        self._retry = retry
        self._parser = SseParser()
        self._failures = 0  # attempts in a row that did not open the stream

    def call(self) -> Call[None]:
        """The request that opens the stream from the cursor (a fresh parser: a half frame is dropped
        with its connection, and sent again after the cursor)."""
        self._parser = SseParser()
        return self._routes.events(self._queues, self.cursor)

    def refused(self, answer: Answer) -> LmstfyError:
        """A stream not opened: its error, raised unless it is worth trying again (503: the server's
        storage is away, as while it restarts)."""
        error = answer.error()
        if answer.status != 503:
            raise error
        return error

    def opened(self) -> None:
        """The stream answered 200: failures in a row start again from none."""
        self._failures = 0

    def feed(self, chunk: bytes) -> list[StreamItem]:
        items = self._parser.feed(chunk)
        for item in items:
            if isinstance(item, QueueEvent):
                self.cursor = item.cursor
        return items

    def broken(self, exc: Exception | None) -> float:
        """Seconds to wait before opening the stream again after it ended (`exc` None: the server ended
        it, as at a restart) or failed; raises when the retry policy gives up (so many failures in a row)."""
        if exc is None:
            failure: LmstfyError = Unavailable("the event stream ended", sent=True)
        else:
            failure = exc if isinstance(exc, LmstfyError) else transport_failure(exc)
        delay = self._retry.delay(self._failures, failure, repeatable=True)
        if delay is None:
            raise failure
        self._failures += 1
        return delay
