"""Beyond lmstfy (SPEC 13 Stream): a queue's events, or several queues' merged, as Server-Sent Events.

`GET /api/{ns}/{q}/events` streams one queue; `GET /api/{ns}/events?queues=a,b` merges 1..16 (without
`queues` that URL stays the consume of a queue named "events": data.consume hands it here only with
`queues`, and web/hot.py leaves such a request to the app). The admin twin is web/admin/ops.py's.

The store checks everything when the stream is opened (events off: 409, a bad cursor: 400), so an
error is a JSON answer before any byte of the stream. Then the head goes at once, and each event is a
frame `id:`/`event:`/`data:`; a gap (events trimmed past the cursor) is `event: gap` without an id;
a comment line every `events_heartbeat` seconds without an event keeps proxies from closing the
connection. The stream ends when the client goes (Starlette's StreamingResponse watches for its
disconnect, as both servers speak ASGI < 2.4) or when the store stops it (SIGTERM).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from lmstfy_py.admin.grants import READ
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import Event, Gap
from lmstfy_py.web import params
from lmstfy_py.web.middleware import route
from lmstfy_py.web.target import authorize, runtime_of, target_of

MAX_MERGED = 16  # queues in one merged stream
HEARTBEAT = b": idle\n\n"
# Proxies (nginx) buffer an answer unless told not to: a stream's events would wait in them.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(item: Event | Gap | None) -> bytes:
    """The bytes of one item of the stream: an event, a gap, or (None: idle) a comment."""
    if item is None:
        return HEARTBEAT
    if isinstance(item, Gap):
        gap = json.dumps({"kind": "gap", "queue": item.queue, "lost": item.lost}, separators=(",", ":"))
        return b"event: gap\ndata: " + gap.encode() + b"\n\n"
    return b"id: " + item.cursor.encode() + b"\nevent: " + item.kind.encode() + b"\ndata: " + item.data + b"\n\n"


def cursor_of(request: Request) -> str | None:
    """Where the stream starts: the `Last-Event-ID` an EventSource sends when it reconnects wins over `after`."""
    return request.headers.get("last-event-id") or request.query_params.get("after")


async def stream(store: JobStore, ns: str, queues: Sequence[str], cursor: str | None, heartbeat_s: float) -> Response:
    """The stream of `queues`, once the store has checked it (its errors are answered before any byte)."""
    events = await store.open_events(ns, queues, cursor, heartbeat_s)
    return StreamingResponse(_frames(events), media_type="text/event-stream", headers=STREAM_HEADERS)


async def _frames(events: AsyncIterator[Event | Gap | None]) -> AsyncGenerator[bytes]:
    try:
        # An empty chunk first: both servers hold a response's head until its first body message.
        yield b""
        async for item in events:
            yield frame(item)
    finally:
        # The client went (this generator is cancelled) or the stream ended: the store forgets it at once.
        if isinstance(events, AsyncGenerator):
            await events.aclose()


def heartbeat_s(request: Request) -> float:
    return float(runtime_of(request).config.server.events_heartbeat)


async def queue_events(request: Request) -> Response:
    """GET /api/{ns}/{q}/events[?after=0|ID]."""
    target = await target_of(request, READ)
    return await stream(target.store, target.ns, [target.queue], cursor_of(request), heartbeat_s(request))


def merged_queues(ns: str, raw: str) -> list[str]:
    """The queues of `queues=a,b`: 1..16 names, none twice."""
    params.check_namespace(ns)
    queues = raw.split(",")
    if not 1 <= len(queues) <= MAX_MERGED or len(set(queues)) != len(queues):
        raise InvalidParameter("invalid queues")
    if not all(params.is_queue_name(queue) for queue in queues):
        raise InvalidParameter("invalid queues")
    return queues


async def namespace_events(request: Request) -> Response:
    """GET /api/{ns}/events?queues=a,b[&after=0|ID]: the merged stream (data.consume hands it here)."""
    ns = request.path_params["ns"]
    queues = merged_queues(ns, request.query_params.get("queues", ""))
    target = await authorize(request, ns, ",".join(queues), READ)
    return await stream(target.store, ns, queues, cursor_of(request), heartbeat_s(request))


def is_merged_stream(queue: str, query_string: bytes) -> bool:
    """GET /api/{ns}/{queue}: the merged stream when `queue` is "events" and the query has `queues`, not
    the consume of a queue named "events" (asked by data.consume and by web/hot.py's dispatcher)."""
    return queue == "events" and "queues" in QueryParams(query_string)


ROUTES = [route("/api/{ns}/{queue}/events", "GET", queue_events)]
