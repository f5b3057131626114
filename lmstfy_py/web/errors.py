"""The one place where an exception becomes an HTTP response.

Handlers raise `LmstfyError` subclasses and let Redis errors propagate; `as_lmstfy_error`
maps everything else onto an `LmstfyError`, and `render` turns it into JSON. One place feeds
it: `middleware.RequestMiddleware`, for every exception, Starlette's routing errors (404, 405)
included, which also gives error responses their X-Request-ID.
"""

from __future__ import annotations

import logging

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MaxConnectionsError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from lmstfy_py.errors import Forbidden, InvalidParameter, LmstfyError, NotFound, StorageUnavailable

log = logging.getLogger(__name__)

# Tells browsers and curl --anyauth that the admin API wants HTTP basic auth.
BASIC_CHALLENGE = 'Basic realm="lmstfy-py"'

# Most specific first: BusyLoadingError and MaxConnectionsError are ConnectionErrors, and the
# builtin TimeoutError an OSError. The reasons stay generic: Redis addresses are not the client's business.
_STORAGE_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (BusyLoadingError, "redis is loading its data"),
    (MaxConnectionsError, "too many redis connections"),
    (ReadOnlyError, "redis is read-only"),
    (OutOfMemoryError, "redis is out of memory"),
    (MasterDownError, "redis lost its master"),  # a ClusterDownError too
    (ClusterDownError, "redis cluster is down"),
    (RedisTimeoutError, "redis timed out"),
    (TimeoutError, "redis timed out"),
    (RedisConnectionError, "cannot connect to redis"),
    (OSError, "cannot connect to redis"),
)


# Error replies redis-py has no class for, by their code: Redis cannot take the command now.
_STORAGE_REPLIES = {
    "MISCONF": "redis cannot persist its data",  # e.g. its disk is full: it refuses writes
    "BUSY": "redis is busy running a script",
}


class _HttpError(LmstfyError):
    """Starlette's own HTTP errors other than routing ones, keeping their status."""

    def __init__(self, exc: HTTPException) -> None:
        super().__init__(exc.detail)
        self.status = exc.status_code


def storage_reason(exc: BaseException) -> str | None:
    for kind, reason in _STORAGE_REASONS:
        if isinstance(exc, kind):
            return reason
    if isinstance(exc, ResponseError):
        return _STORAGE_REPLIES.get(str(exc).split(" ", 1)[0])
    return None


def as_lmstfy_error(exc: Exception) -> LmstfyError:
    if isinstance(exc, LmstfyError):
        return exc
    if isinstance(exc, HTTPException):
        # gin answers unknown paths and known paths with another method alike.
        return NotFound("api not found") if exc.status_code in (404, 405) else _HttpError(exc)
    reason = storage_reason(exc)
    if reason is not None:
        log.warning("storage unavailable: %s: %s", type(exc).__name__, exc)
        return StorageUnavailable(f"storage unavailable: {reason}")
    if isinstance(exc, ClientDisconnect):
        return InvalidParameter("client disconnected")
    log.error("internal error", exc_info=exc)
    return LmstfyError("internal error")


def render(err: LmstfyError) -> Response:
    headers = {"WWW-Authenticate": BASIC_CHALLENGE} if isinstance(err, Forbidden) else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)
