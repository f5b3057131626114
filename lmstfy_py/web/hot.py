"""The lean dispatcher: the four hot data routes without Starlette's middleware stack and router.

`HotRoutes` is the ASGI app that `lmstfy-py serve` serves on the data port (server.py), under
hypercorn and uvicorn alike, in front of the data app. Publish (`PUT /api/{ns}/{queue}`),
consume (`GET /api/{ns}/{queue}[,...]`), ACK (`DELETE .../job/{job_id}`) and batch ACK
(`DELETE .../jobs`) are matched by splitting the path; every other request, and any that is not
exactly one of those shapes, goes to the app unchanged.

A hot request gets the scope the app's routing would have given it (its app, route, endpoint,
path parameters, state) and runs the route's work in web/hot_routes.py, which data.py's handlers
run too: the checks, parameters, store call and errors are one code, and the answers' bytes are
web/answers.py's. What it skips is Starlette's per-request objects (Request, QueryParams,
Response) and what the app's stack does around a handler, done here in one frame:
RequestMiddleware's request id, error rendering, metrics and access log (the same functions:
`request_id`, errors.py's `render`, `instrument.record`, `accesslog.write`), MethodRouter's
regex matching, the endpoint wrapper, the response's own ASGI call and the `send` wrappers. The
body deadline is RequestBodyMiddleware's, as in the app (both in web/middleware.py). Measured in
docs/PERFORMANCE.md (issue 27).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from lmstfy_py import logs
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import answers, data, events, hot_routes, params
from lmstfy_py.web.errors import as_lmstfy_error, render
from lmstfy_py.web.hot_routes import Call, FirstHeaders, shared_query
from lmstfy_py.web.middleware import RequestBodyMiddleware, request_done, request_id

_PREFIX = "/api/"
_REQUEST_ID = b"x-request-id"  # ASGI servers hand header names lower-cased
_JSON = answers.JSON.encode("latin-1")

# (method, segments after /api/, the literal third segment or "") -> the endpoint that takes it.
# data.ROUTES lists these four first, so for these shapes its router picks the same ones.
_SHAPES = {
    ("PUT", 2, ""): data.publish,
    ("GET", 2, ""): data.consume,
    ("DELETE", 4, "job"): data.ack,
    ("DELETE", 3, "jobs"): data.ack_many,
}


class HotRoutes:
    """The data app with its four hot routes dispatched lean (see the module's docstring)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        runtime = cast(Runtime, app.state.runtime)
        self.runtime = runtime
        self._routes = {shape: _route_of(app, endpoint) for shape, endpoint in _SHAPES.items()}
        self._work: dict[object, Work] = {
            data.publish: _publish,
            data.consume: _consume,
            data.ack: _ack,
            data.ack_many: _ack_many,
        }
        self._hot = RequestBodyMiddleware(self._answer, timeout=runtime.config.server.body_timeout)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.accepts(scope):
            await self._hot(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _dispatch(self, scope: Scope) -> bool:
        """Whether the request is a hot route's; if so its scope gets what the app's routing sets."""
        path: str = scope["path"]
        # A root path would be stripped by Starlette's routing first: such a request is the app's.
        if not path.startswith(_PREFIX) or scope.get("root_path"):
            return False
        parts = path[len(_PREFIX) :].split("/")
        if not all(parts):  # `{param}` takes one non-empty segment
            return False
        route = self._routes.get((scope["method"], len(parts), parts[2] if len(parts) > 2 else ""))
        # The merged event stream (its answer streams) shares the consume's shape: the app's.
        if route is None or (
            route.endpoint is data.consume and events.is_merged_stream(parts[1], scope["query_string"])
        ):
            return False
        path_params = {"ns": parts[0], "queue": parts[1]}
        if len(parts) == 4:
            path_params["job_id"] = parts[3]
        scope["app"] = self.app  # as Starlette.__call__, then MethodRouter with the route's child scope
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = path_params
        return True

    def accepts(self, scope: Scope) -> bool:
        """Whether `scope` is a hot route's request; if so it now has what the app's routing sets."""
        return scope["type"] == "http" and self._dispatch(scope)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def write(answer: Answer) -> None:
            await send({"type": "http.response.start", "status": answer[0], "headers": answer[1]})
            await send({"type": "http.response.body", "body": answer[2]})

        await self.respond(scope, receive, write)

    async def respond(self, scope: Scope, receive: Receive, write: Callable[[Answer], Awaitable[None]]) -> None:
        """RequestMiddleware's work and the route's call, in one frame; `write` sends the answer (an
        ASGI send, or uvicorn_serve.py's write of a whole answer to its connection)."""
        started = time.perf_counter()
        rid = request_id(_first_header(scope, _REQUEST_ID))
        scope.setdefault("state", {})["request_id"] = rid
        logged_request = logs.current_request.set(scope)
        log_it = self.runtime.access_log_switch.on  # accesslog.enabled's answer, without its lookups
        status = 0  # 0 until the response starts
        try:
            try:
                answer = await self._work[scope["endpoint"]](self._call(scope, receive))
            except Exception as exc:
                error = render(as_lmstfy_error(exc))
                answer = error.status_code, list(error.raw_headers), bytes(error.body)
            # Where MutableHeaders puts it in the app: last, as the app sends no X-Request-ID of its own.
            answer[1].append((_REQUEST_ID, rid.encode("latin-1")))
            status = answer[0]
            await write(answer)
        finally:
            request_done(scope, status, started, log_it, logged_request)

    def _call(self, scope: Scope, receive: Receive) -> Call:
        path = scope["path_params"]
        query, headers = shared_query(scope["query_string"]), FirstHeaders(scope["headers"])
        state, job_id = scope["state"], path.get("job_id", "")
        return Call(
            self.runtime,
            state,
            path["ns"],
            path["queue"],
            query,
            headers,
            _body(receive, headers.get("content-length")),
            job_id,
        )


def _body(receive: Receive, declared: str | None) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        return await params.read_body_from(receive, declared)

    return read


# A hot route's answer: status, headers, body.
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
Work = Callable[[Call], Awaitable[Answer]]


def _json(status: int, body: bytes) -> Answer:
    # The headers a Starlette Response with media_type JSON makes, in its order.
    return status, [(b"content-length", str(len(body)).encode("latin-1")), (b"content-type", _JSON)], body


async def _publish(call: Call) -> Answer:
    return _json(*answers.published_body(await hot_routes.publish(call)))


async def _consume(call: Call) -> Answer:
    return _json(200, answers.consumed_body(*await hot_routes.consume(call)))


async def _ack(call: Call) -> Answer:
    await hot_routes.ack(call)
    return 204, [], b""


async def _ack_many(call: Call) -> Answer:
    await hot_routes.ack_many(call)
    return 204, [], b""


def _route_of(app: Starlette, endpoint: Any) -> Route:
    for found in app.routes:
        if isinstance(found, Route) and found.endpoint is endpoint:
            return found
    raise LookupError(f"the data app has no route for {endpoint.__name__}")


def _first_header(scope: Scope, name: bytes) -> str | None:
    # Starlette's Headers.get: the first of repeated headers.
    for key, value in scope["headers"]:
        if key == name:
            return cast(bytes, value).decode("latin-1")
    return None
