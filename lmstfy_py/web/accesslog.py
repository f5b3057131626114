"""The access log, switched on and off at run time (GET/POST /accesslog).

One line per request to the logger "lmstfy_py.access" while `Runtime.access_log` is on
(written by middleware.RequestMiddleware); logs.py sends that logger to stdout or LogDir's
access.log, as a plain line or with lmstfy's fields (pool, path, query, latency, ip, method,
code, req_id, plus namespace and queue) in logrus's text or JSON. This is the only access log:
hypercorn's own stays off, so the switch is the single source of truth, and a server with the
log off pays one attribute read per request.

A POST /accesslog on any worker is stored in the admin Redis and reaches every worker of every
instance within a second (admin/switches.py); a GET answers the stored switch. `access_log` in
the config (or `--access-log`) is where each process starts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import Scope

from lmstfy_py.logs import ACCESS_FIELDS, ACCESS_LOGGER

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

LOGGER_NAME = ACCESS_LOGGER
log = logging.getLogger(LOGGER_NAME)
HIDDEN = "***"  # what the query's token becomes in a line


def enabled(scope: Scope) -> bool:
    # An app built without a runtime (a test's bare app) has no switch: off.
    runtime: Runtime | None = scope["app"].state.runtime
    return runtime is not None and runtime.access_log


def _path(scope: Scope) -> str:
    path: str = scope["path"]
    # The admin routes that name a token in their path (/token/{ns}/{token}[/limit]): it is a secret.
    token = scope.get("path_params", {}).get("token")
    if token:
        path = "/".join(HIDDEN if segment == token else segment for segment in path.split("/"))
    # The ASGI path is percent-decoded: quoted again, a "%0A" cannot forge a second log line.
    return quote(path, safe="/:@,;=+!$&'()*")


def _remote(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def _query(scope: Scope) -> str:
    """The query string with its token hidden: lmstfy logs the query, and a token is a secret."""
    raw: str = scope.get("query_string", b"").decode("latin-1")
    pairs = parse_qsl(raw, keep_blank_values=True)
    if not any(key == "token" for key, _ in pairs):
        return raw
    return urlencode([(key, HIDDEN if key == "token" else value) for key, value in pairs], safe="*")


def _level(status: int) -> int:
    # As lmstfy's access log: 5xx an error, 4xx but 404 a warning.
    if status >= 500:
        return logging.ERROR
    return logging.WARNING if 400 <= status < 500 and status != 404 else logging.INFO


def fields(scope: Scope, status: int, seconds: float) -> dict[str, Any]:
    """lmstfy's access-log fields of a finished request, and the namespace and queue it names."""
    state, params = scope.get("state", {}), scope.get("path_params", {})
    client = scope.get("client")
    return {
        "pool": state.get("pool", ""),
        "path": _path(scope),
        "query": _query(scope),
        "latency": seconds,
        "ip": client[0] if client else "",
        "method": scope["method"],
        "code": status,
        "req_id": state.get("request_id", ""),
        "namespace": params.get("ns"),
        "queue": params.get("queue"),
    }


def write(scope: Scope, status: int, seconds: float) -> None:
    """One line for a finished request. The plain line has no query string: it may carry a token."""
    log.log(
        _level(status),
        "%s %s %d %.1fms request_id=%s remote=%s",
        scope["method"],
        _path(scope),
        status,
        seconds * 1000,
        scope.get("state", {}).get("request_id", "-"),
        _remote(scope),
        extra={ACCESS_FIELDS: fields(scope, status, seconds)},
    )
