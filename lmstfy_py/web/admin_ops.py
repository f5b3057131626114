"""Admin routes for operators: namespaces, dead letters, the access-log switch."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
