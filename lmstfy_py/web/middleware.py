"""The stack both apps share: pure ASGI middleware (never BaseHTTPMiddleware, which breaks
contextvars and long-polls), the error handling of errors.py, the request id, the body deadline,
and one-method routes.

Every layer between hypercorn and a handler costs every request a call and often a wrapped
`send`, so the stack is Starlette's parts without its extras: `RequestMiddleware` (it answers
every exception, which makes Starlette's ServerErrorMiddleware and ExceptionMiddleware
redundant) inside only the body deadline (RequestBodyMiddleware, below; requests without a body
skip), a router that tries only the routes of the request's method, and endpoints called
without Starlette's per-request exception wrapper.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
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

from lmstfy_py import logs
from lmstfy_py.config import ServerConfig
from lmstfy_py.errors import BodyTimeout
from lmstfy_py.web import accesslog, instrument
from lmstfy_py.web.errors import as_lmstfy_error, render

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
        rid = request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
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

    Outermost is the request body's deadline (RequestBodyMiddleware), then RequestMiddleware.
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


# -- the request id ----------------------------------------------------------------

# Request ids' random bits: a fast generator of our own, so that an application embedding the
# server and seeding `random` for itself cannot make every replica repeat the same ids; seeded
# afresh in every forked worker, as `random`'s own is. Every answer shows 128 of its bits, and a
# few hundred answers give its state away: job ids do not use it (store/jobdata.py).
_random = random.Random()
os.register_at_fork(after_in_child=_random.seed)
_random_bits = _random.getrandbits
# A caller's X-Request-ID is echoed back only if it cannot garble a log line or a header.
_SANE_REQUEST_ID = re.compile(r"[-A-Za-z0-9_.:+/=]{1,128}")


def request_id(incoming: str | None) -> str:
    """A request's id: the caller's, if sane, else 128 random bits in hex, like a uuid4 without its
    read of os.urandom per request (its generator is seeded afresh in every forked worker)."""
    if incoming is not None and _SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return f"{_random_bits(128):032x}"


# -- the body deadline -------------------------------------------------------------

# How long a request's body may take, and what an answer given before the body ended does to the connection.
#
# hypercorn's `read_timeout` bounds each read, so a client sending one byte a second is never cut
# off. `RequestBodyMiddleware` bounds the whole body instead: a request still waiting for its body
# `body_timeout` seconds after its head arrived gets `BodyTimeout` (408) from that wait.
#
# An answer that starts before the app has received the whole body (that 408, a 413, or an error
# raised before the handler read the body) ends the connection: the server does not read what is
# left of the body (up to 100 MB of a refused upload), so the connection cannot carry another
# request, and the answer says `Connection: close` so that the client does not try.

# How often the waiting bodies are checked: a deadline is enforced at most this late.
SWEEP_S = 0.25


class RequestBodyMiddleware:
    """Outermost, so that it sees every answer, errors rendered by RequestMiddleware included.

    Requests without a body pass straight through, at the cost of a look at their headers. The
    deadlines share one timer, a sweep a few times a second while any body is awaited: a timer
    per request (asyncio.timeout) cost a publish ~10 µs more.
    """

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout
        self._pending: set[_Body] = set()  # bodies not yet received whole
        self._sweep_timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        body = _Body(receive, send, loop.time() + self.timeout, self._pending)
        self._pending.add(body)
        if self._sweep_timer is None:
            self._sweep_timer = loop.call_later(SWEEP_S, self._sweep, loop)
        try:
            await self.app(scope, body.receive, body.send)
        finally:
            self._pending.discard(body)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for body in self._pending:
            if now >= body.deadline:
                body.expire()
        self._sweep_timer = loop.call_later(SWEEP_S, self._sweep, loop) if self._pending else None


def has_body(scope: Scope) -> bool:
    name: bytes
    value: bytes
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip().lstrip(b"0") != b""
        if name == b"transfer-encoding":
            return True
    return False


class _Body:
    """One request's body on its way in, and its answer on its way out."""

    __slots__ = ("_closing", "_expired", "_pending", "_receive", "_send", "_waiting", "deadline")

    def __init__(self, receive: Receive, send: Send, deadline: float, pending: set[_Body]) -> None:
        self._receive = receive
        self._send = send
        self.deadline = deadline
        self._pending = pending  # holds this body until the app has had its last message
        self._waiting: asyncio.Task[object] | None = None  # the app's task, while it waits for the body
        self._expired = False  # the sweep cancelled that wait
        self._closing = False  # the answer ends the connection

    def expire(self) -> None:
        """Past the deadline: the app's wait for the body, if it is waiting, ends in BodyTimeout.

        An app not waiting now is left alone: the body may be whole by the time it asks.
        """
        if self._waiting is not None and not self._expired:
            self._expired = True
            self._waiting.cancel()

    async def receive(self) -> Message:
        if self not in self._pending:
            return await self._receive()
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        self._waiting = task
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            # Ours, unless the task is being cancelled for another reason as well.
            if self._expired and task.uncancel() <= cancelling:
                raise BodyTimeout("body not received in time") from None
            raise
        finally:
            self._waiting = None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._pending.discard(self)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and self in self._pending:
            self._closing = True
            MutableHeaders(scope=message)["connection"] = "close"  # h11 then ends the connection after it
        if self._closing and message["type"] == "http.response.body" and not message.get("more_body", False):
            await self._send_last(message)
        else:
            await self._send(message)

    async def _send_last(self, message: Message) -> None:
        # Ending the response, hypercorn hands the app `http.disconnect` through the request's
        # queue and waits for room in it. The unread body may have filled that queue (10
        # chunks) and the app reads no more: without a reader the hand-over would wait for
        # ever, leaving the connection open and a graceful stop waiting its whole timeout.
        discard = asyncio.create_task(self._discard_until_disconnect())
        try:
            await self._send(message)
        finally:
            discard.cancel()

    async def _discard_until_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
