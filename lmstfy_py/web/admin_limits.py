"""Admin routes for throttle limits: /limits and /token/{ns}/{token}/limit."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
