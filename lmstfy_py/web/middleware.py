"""The stack both apps share: pure ASGI middleware (never BaseHTTPMiddleware, which breaks
contextvars and long-polls), the error handling of errors.py, and one-method routes."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lmstfy_py.web import accesslog, instrument
from lmstfy_py.web.errors import EXCEPTION_HANDLERS, ErrorMiddleware

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is echoed back only if it cannot garble a log line or a header.
_SANE_REQUEST_ID = re.compile(r"[-A-Za-z0-9_.:+/=]{1,128}")


def request_id(incoming: str | None) -> str:
    if incoming is not None and _SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Gives every response an X-Request-ID: the caller's, if sane, else a fresh uuid4.

    The id is also left in `request.state.request_id` for logs.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            await send(message)

        await self.app(scope, receive, send_with_id)


class RequestObserver:
    """Times each request and notes its status, for the metrics and (while on) the access log."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app fails before starting a response
        log_it = accesslog.enabled(scope)  # as the request starts: POST /accesslog logs its "disable", not its "enable"

        async def capture_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture_status)
        finally:
            seconds = time.perf_counter() - started
            instrument.record(scope, status, seconds)
            if log_it:
                accesslog.write(scope, status, seconds)


def build_app(runtime: Runtime, routes: Sequence[BaseRoute], inner: Sequence[Middleware] = ()) -> Starlette:
    """An app with the stack both ports share; the runtime lives on app.state, not in a global.

    `inner` middleware runs inside the shared stack, so its errors are rendered and its
    answers carry a request id, are logged and are counted.
    """
    app = Starlette(
        routes=list(routes),
        # Outermost first: the request id must also reach responses that ErrorMiddleware makes.
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(RequestObserver),
            Middleware(ErrorMiddleware),
            *inner,
        ],
        exception_handlers=dict(EXCEPTION_HANDLERS),
    )
    app.state.runtime = runtime
    return app


def route(path: str, method: str, endpoint: Callable[[Request], Awaitable[Response]]) -> Route:
    """A route for exactly one method."""
    found = Route(path, endpoint, methods=[method])
    # Starlette adds HEAD to every GET route; gin does not, and a HEAD that consumed a job
    # (and dropped its body) would lose it for ttr seconds.
    found.methods = {method}
    return found
