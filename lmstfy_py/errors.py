"""Every error a request can meet, each knowing its HTTP status.

The web layer turns these into JSON in exactly one exception handler; nothing
else builds an error body. lmstfy answers a few cases under the key "msg"
instead of "error" (no job available, throttled), so the key is part of the
error too.
"""

from __future__ import annotations


class LmstfyError(Exception):
    status: int = 500
    key: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, str]:
        return {self.key: self.message}


class InvalidParameter(LmstfyError):
    """A query parameter, name or body the client sent is malformed."""

    status = 400


class BodyTooLarge(LmstfyError):
    status = 413


class BodyTimeout(LmstfyError):
    """The request body did not arrive within the server's body deadline."""

    status = 408


class Unauthorized(LmstfyError):
    status = 401


class Forbidden(LmstfyError):
    """Admin basic auth failed."""

    status = 401


class OutOfScope(LmstfyError):
    """A valid token whose scopes or queue patterns do not cover the route (SPEC 15, admin/grants.py)."""

    status = 403

    def __init__(self, message: str = "token scope forbids this") -> None:
        super().__init__(message)


class CrossSiteRefused(LmstfyError):
    """A change a browser asked for from another site (admin port), or a dashboard form whose CSRF
    token is missing or wrong."""

    status = 403


class NotFound(LmstfyError):
    status = 404


class Conflict(LmstfyError):
    """The job exists but is not in the state the request needs (e.g. releasing a job not reserved)."""

    status = 409


class NoJobAvailable(LmstfyError):
    status = 404
    key = "msg"

    def __init__(self, message: str = "no job available") -> None:
        super().__init__(message)


class Throttled(LmstfyError):
    status = 429
    key = "msg"


class StorageUnavailable(LmstfyError):
    """Redis cannot be reached; the server keeps running and recovers by itself."""

    status = 503
