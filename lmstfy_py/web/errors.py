"""The one place where an exception becomes an HTTP response.

Handlers raise `LmstfyError` subclasses and let Redis errors propagate; `as_lmstfy_error`
maps everything else onto an `LmstfyError`, and `render` turns it into JSON. One place feeds
it: `middleware.RequestMiddleware`, for every exception, Starlette's routing errors (404, 405)
included, which also gives error responses their X-Request-ID.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from lmstfy_py.errors import Forbidden, InvalidParameter, LmstfyError, NotFound, StorageUnavailable
from lmstfy_py.store.faults import outage_reason, unreachable

log = logging.getLogger(__name__)

REFUSALS_LOGGED_EVERY_S = 10.0
_refused: Counter[str] = Counter()  # reason -> requests refused since it was last logged
_refusals_next_log: dict[str, float] = {}  # reason -> when it may be logged again (monotonic)

# Tells browsers and curl --anyauth that the admin API wants HTTP basic auth.
BASIC_CHALLENGE = 'Basic realm="lmstfy-py"'


class MisdirectedHost(LmstfyError):
    """The admin port was asked under a host name it does not serve (a DNS-rebinding page, web/admin/hosts.py)."""

    status = 421


class LoginsLimited(LmstfyError):
    """Too many failed admin logins from the client's address (admin/logins.py): wait `retry_after` seconds."""

    status = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed logins from this address, retry in {retry_after}s")
        self.retry_after = retry_after


class _HttpError(LmstfyError):
    """Starlette's own HTTP errors other than routing ones, keeping their status."""

    def __init__(self, exc: HTTPException) -> None:
        super().__init__(exc.detail)
        self.status = exc.status_code


def as_lmstfy_error(exc: Exception) -> LmstfyError:
    if isinstance(exc, LmstfyError):
        return exc
    if isinstance(exc, HTTPException):
        # gin answers unknown paths and known paths with another method alike.
        return NotFound("api not found") if exc.status_code in (404, 405) else _HttpError(exc)
    reason = outage_reason(exc)
    if reason is not None:
        _log_outage(reason, exc)
        return StorageUnavailable(f"storage unavailable: {reason}")
    if isinstance(exc, ClientDisconnect):
        return InvalidParameter("client disconnected")
    log.error("internal error", exc_info=exc)
    return LmstfyError("internal error")


def _log_outage(reason: str, exc: BaseException) -> None:
    """A failed request leaves no log line of its own when Redis does not answer: the pool's health
    check (store/health.py) says so once. Refusals (out of memory, cannot persist, ...) are logged,
    at most once per reason every REFUSALS_LOGGED_EVERY_S with how many requests they refused."""
    if unreachable(exc):
        log.debug("storage unavailable: %r", exc)
        return
    now = time.monotonic()
    _refused[reason] += 1
    if now >= _refusals_next_log.get(reason, 0.0):
        log.warning("redis refused %d request(s): %s (%s)", _refused.pop(reason), reason, exc)
        _refusals_next_log[reason] = now + REFUSALS_LOGGED_EVERY_S


def render(err: LmstfyError) -> Response:
    return JSONResponse(err.body(), status_code=err.status, headers=_headers(err))


def _headers(err: LmstfyError) -> dict[str, str] | None:
    if isinstance(err, Forbidden):
        return {"WWW-Authenticate": BASIC_CHALLENGE}
    if isinstance(err, LoginsLimited):
        return {"Retry-After": str(err.retry_after)}
    return None
