"""The stack both apps share: pure ASGI middleware (never BaseHTTPMiddleware, which breaks
contextvars and long-polls), the error handling of errors.py, and one-method routes.

Every layer between hypercorn and a handler costs every request a call and often a wrapped
`send`, so the stack is Starlette's parts without its extras: `RequestMiddleware` (it answers
every exception, which makes Starlette's ServerErrorMiddleware and ExceptionMiddleware
redundant) inside only the body deadline of request_body.py (which requests without a body
skip), a router that tries only the routes of the request's method, and endpoints called
without Starlette's per-request exception wrapper.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from contextvars import Token
from typing import TYPE_CHECKING, Any, cast

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lmstfy_py import ids, logs
from lmstfy_py.config import ServerConfig
from lmstfy_py.web import accesslog, instrument
from lmstfy_py.web.errors import as_lmstfy_error, render
from lmstfy_py.web.request_body import RequestBodyMiddleware

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

REQUEST_ID_HEADER = "X-Request-ID"


class RequestMiddleware:
    """The one wrapper every request passes through, outermost but for the body deadline.

    It gives every response an X-Request-ID (the caller's, if sane, else 128 fresh random bits
    in hex; also left in `request.state.request_id` for logs), answers any exception a handler raises
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
        rid = ids.request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        scope.setdefault("state", {})["request_id"] = rid
        # What every log line written meanwhile names (req_id, pool, namespace, queue: logs.py).
        logged_request = logs.current_request.set(scope)
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
            request_done(scope, status, started, log_it, logged_request)


def request_done(scope: Scope, status: int, started: float, log_it: bool, logged_request: Token[Any]) -> None:
    """A request's bookkeeping once answered, for the app's middleware and web/hot.py alike: its
    metrics, its access-log line, and the log context restored. `status` 0: nothing was sent (500)."""
    seconds = time.perf_counter() - started
    status = status or 500  # what the server answers when nothing was sent
    instrument.record(scope, status, seconds)
    if log_it:
        accesslog.write(scope, status, seconds)
    logs.current_request.reset(logged_request)


class MethodRouter:
    """Tries only the routes of the request's method, in their declared order.

    Starlette's router tries every route in turn (a publish was matched against 13 patterns).
    Whatever no route of its method takes (404, 405) and lifespan events go to
    Starlette's router, which answers them as before.
    """

    def __init__(self, router: Router) -> None:
        self.router = router
        self.by_method: dict[str, list[Route]] = defaultdict(list)
        for found in router.routes:
            for method in getattr(found, "methods", None) or ():
                self.by_method[method].append(cast(Route, found))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for found in self.by_method.get(scope["method"], ()):
                match, child_scope = found.matches(scope)
                if match is Match.FULL:
                    scope["route"] = found
                    scope.update(child_scope)
                    await found.handle(scope, receive, send)
                    return
        await self.router(scope, receive, send)


class _App(Starlette):
    def build_middleware_stack(self) -> ASGIApp:
        app: ASGIApp = MethodRouter(self.router)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app


def build_app(
    runtime: Runtime,
    routes: Sequence[BaseRoute],
    inner: Sequence[Middleware] = (),
    body_timeout: float = ServerConfig.body_timeout,
) -> Starlette:
    """An app with the stack both ports share; the runtime lives on app.state, not in a global.

    Outermost is the request body's deadline (request_body.py), then RequestMiddleware.
    `inner` middleware runs inside the shared stack, so its errors are rendered and its
    answers carry a request id, are logged and are counted.
    """
    stack = [Middleware(RequestBodyMiddleware, timeout=body_timeout), Middleware(RequestMiddleware), *inner]
    app = _App(routes=list(routes), middleware=stack)
    # Starlette would answer a path that matches once a trailing slash is added or removed
    # (`/api/ns/q,%2F`) with a 307 to a URL built from the client's Host header: an open redirect.
    # lmstfy's routes have one spelling each; any other is 404 "api not found".
    app.router.redirect_slashes = False
    app.state.runtime = runtime
    return app


Endpoint = Callable[[Request], Awaitable[Response]]


def route(path: str, method: str, endpoint: Endpoint) -> Route:
    """A route for exactly one method."""
    found = Route(path, endpoint, methods=[method])
    # Starlette adds HEAD to every GET route; gin does not, and a HEAD that consumed a job
    # (and dropped its body) would lose it for ttr seconds.
    found.methods = {method}
    found.app = _endpoint_app(endpoint)
    return found


def _endpoint_app(endpoint: Endpoint) -> ASGIApp:
    # Starlette's request_response would wrap every call (and its send) to look up exception
    # handlers; exceptions go straight to RequestMiddleware instead.
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    return app
