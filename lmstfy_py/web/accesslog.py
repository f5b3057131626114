"""The access log, switched on and off at run time (GET/POST /accesslog)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class AccessLogMiddleware:
    """Logs one line per request while the runtime's access log is on (pass-through until implemented)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
