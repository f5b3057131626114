"""HTTP basic auth for the admin app when accounts are configured."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class AdminAuthMiddleware:
    """Requires basic auth on every admin route but the public ones (pass-through until implemented)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
