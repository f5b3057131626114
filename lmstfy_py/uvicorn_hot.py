"""uvicorn's connection answering the hot data routes' whole requests itself (issue 27).

A publish, consume, ACK or batch ACK (web/hot.py's shapes) whose body came whole in the read that
completed its head is answered by `HotRoutes.respond` written straight to the connection, in one
write: no ASGI cycle (its receive and send, their message dicts, the header checks of a send)
and no body-deadline wrapper, as the body is in hand. What it saves is measured in
docs/PERFORMANCE.md ("Whole requests answered by the connection").

A client cannot tell the two ways apart: the bytes are those RequestResponseCycle.send writes
(the Date header, the answer's headers in order, `Connection: close` when the request or a stop
asks for it); an answer waits, as there, while the client leaves earlier ones unread; and an
answer given before the handler took the body ends the connection, as the body deadline
(web/middleware.py) does for the ASGI way; tests/e2e/test_whole_requests.py holds the two ways
to the same bytes. A request still waiting for its body, or asking `Expect: 100-continue`, and every
other route, goes the ASGI way as uvicorn runs it. The answer still runs in a task of its own, as
uvicorn's would: a stop waits for it (`server_state.tasks`), and redis-py's reads need a task
(asyncio.timeout).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import uvicorn
from starlette.types import Message, Scope
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from lmstfy_py.uvicorn_connection import CLOSE, answer_bytes
from lmstfy_py.web.hot import Answer, HotRoutes
from lmstfy_py.web.middleware import has_body

log = logging.getLogger(__name__)

# What uvicorn's run_asgi sends for an exception before the answer began (send_500_response).
ANSWER_500: Answer = (
    500,
    [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21"), CLOSE],
    b"Internal Server Error",
)


class HotAnswers(HttpToolsProtocol):
    """HttpToolsProtocol with the hot routes' whole requests answered by the connection."""

    def __init__(
        self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any], **more: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **more)
        self._hot = self.app if isinstance(self.app, HotRoutes) else None
        self._reading = False  # inside data_received: a hot request's body may still come in this read
        self._held: RequestResponseCycle | None = None  # such a request, started once the read is parsed

    def data_received(self, data: bytes) -> None:
        self._reading = True
        try:
            super().data_received(data)
        finally:
            self._reading = False
            held, self._held = self._held, None
        if held is not None:
            self._start(held)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if (
            self._hot is None
            or app is not self.app  # uvicorn's 503 of its concurrency limit
            or cycle.waiting_for_100_continue
            or not self._hot.accepts(_scope(cycle))
        ):
            super()._start_asgi_task(cycle, app)
        elif self._reading:
            self._held = cycle
        else:  # a pipelined request, its turn come: its bytes were read before
            self._start(cycle)

    def _start(self, cycle: RequestResponseCycle) -> None:
        if cycle.more_body:  # its body is still coming (a bodyless request's message ends with its head)
            super()._start_asgi_task(cycle, self.app)
            return
        task = self.loop.create_task(self._answer(cycle))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _answer(self, cycle: RequestResponseCycle) -> None:
        assert self._hot is not None
        scope = _scope(cycle)
        body: Message = {"type": "http.request", "body": bytes(cycle.body), "more_body": False}
        cycle.body = bytearray()
        taken = False

        async def receive() -> Message:
            nonlocal taken
            taken = True
            if not cycle.disconnected:  # as uvicorn's receive: a body past 64 KiB had paused reading
                self.flow.resume_reading()
            return body

        async def write(answer: Answer) -> None:
            if not taken and has_body(scope):  # the body deadline's rule (web/middleware.py)
                answer[1].append(CLOSE)
                cycle.keep_alive = False
            # As RequestResponseCycle.send: a client not reading its answers holds the next ones
            # back (and, pipelining, its next requests), not the server's memory.
            if self.flow.write_paused and not cycle.disconnected:
                await self.flow.drain()
            self._write(cycle, answer)

        try:
            await self._hot.respond(scope, receive, write)
        except BaseException as exc:  # as uvicorn's run_asgi
            log.error("Exception in ASGI application", exc_info=exc)
            if not cycle.response_started and not cycle.disconnected:
                cycle.keep_alive = False
                self._write(cycle, ANSWER_500)
            self.transport.close()

    def _write(self, cycle: RequestResponseCycle, answer: Answer) -> None:
        if cycle.disconnected:
            return
        status, headers, content = answer
        cycle.response_started = cycle.response_complete = True
        default_headers = self.server_state.default_headers
        self.transport.write(answer_bytes(STATUS_LINE[status], default_headers, headers, content, not cycle.keep_alive))
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()


def _scope(cycle: RequestResponseCycle) -> Scope:
    return cast(Scope, cycle.scope)
