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
from lmstfy_py.web.errors import EXCEPTION_HANDLERS, as_lmstfy_error, render

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is echoed back only if it cannot garble a log line or a header.
_SANE_REQUEST_ID = re.compile(r"[-A-Za-z0-9_.:+/=]{1,128}")


def request_id(incoming: str | None) -> str:
    if incoming is not None and _SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestMiddleware:
    """The one wrapper every request passes through, outermost.

    It gives every response an X-Request-ID (the caller's, if sane, else a fresh uuid4; also
    left in `request.state.request_id` for logs), answers any exception a handler raises
    (unless the response has already begun) through errors.py, and times the request and
    notes its status for the metrics and, while on, the access log. One layer rather than
    three: each layer wraps `send` again for every request, and this is the hot path.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        scope.setdefault("state", {})["request_id"] = rid
        log_it = accesslog.enabled(scope)  # as the request starts: POST /accesslog logs its "disable", not its "enable"
        status = 0  # 0 until the response starts

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if status:  # half a response cannot be replaced; the server logs it and drops the connection
                raise
            await render(as_lmstfy_error(exc))(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            status = status or 500  # what the server answers when nothing was sent
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
        middleware=[Middleware(RequestMiddleware), *inner],
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
