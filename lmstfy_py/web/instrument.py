"""Prometheus metrics: GET /metrics and the HTTP request instrumentation."""

from __future__ import annotations

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

ROUTES: list[BaseRoute] = []


class HttpMetricsMiddleware:
    """Counts requests and their latency by route and status (pass-through until implemented)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
