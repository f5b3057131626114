"""The access log, switched on and off at run time (GET/POST /accesslog).

One line per request to the logger "lmstfy_py.access" while `Runtime.access_log` is on
(written by middleware.RequestMiddleware); the server sends that logger to stdout
(`log_to_stdout`). This is the only access log:
hypercorn's own stays off, so the switch is the single source of truth, and a server with the
log off pays one attribute read per request.

The switch lives in the process: with `--workers N`, a POST /accesslog reaches the one worker
that answered it. Set `access_log` in the config (or `--access-log`) to log on every worker.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.types import Scope

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

LOGGER_NAME = "lmstfy_py.access"
STDOUT_HANDLER = "lmstfy_py.access.stdout"
log = logging.getLogger(LOGGER_NAME)


def log_to_stdout() -> None:
    """Sends the access log to stdout, one line per request (idempotent)."""
    if any(handler.get_name() == STDOUT_HANDLER for handler in log.handlers):
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.set_name(STDOUT_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # stdout only, not also the error log on stderr


def enabled(scope: Scope) -> bool:
    # An app built without a runtime (a test's bare app) has no switch: off.
    runtime: Runtime | None = scope["app"].state.runtime
    return runtime is not None and runtime.access_log


def _path(scope: Scope) -> str:
    # The ASGI path is percent-decoded: quoted again, a "%0A" cannot forge a second log line.
    return quote(scope["path"], safe="/:@,;=+!$&'()*")


def _remote(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def write(scope: Scope, status: int, seconds: float) -> None:
    """One line for a finished request. The path goes without its query string: it may carry a token."""
    log.info(
        "%s %s %d %.1fms request_id=%s remote=%s",
        scope["method"],
        _path(scope),
        status,
        seconds * 1000,
        scope.get("state", {}).get("request_id", "-"),
        _remote(scope),
    )
