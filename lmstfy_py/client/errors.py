"""The client's exceptions: one per kind of failure a caller handles differently.

These are the client's own (the server's live in lmstfy_py/errors.py and are never imported
here): each carries the server's message, the HTTP status (None when no answer came) and the
answer's X-Request-ID, so a failure can be found in the server's logs.
"""

from __future__ import annotations


class LmstfyError(Exception):
    """Any failure of a request; `message` is the server's own words when it answered."""

    def __init__(self, message: str, status: int | None = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        return f"{self.status} {self.message}" if self.status is not None else self.message


class BadRequest(LmstfyError):
    """400: a parameter, name or body the server refused; nothing was changed."""


class Unauthorized(LmstfyError):
    """401: no token, or a token of another namespace or pool."""


class NotFound(LmstfyError):
    """404: no such job, pool or route (a consume that finds no job is not an error: it returns nothing)."""


class Conflict(LmstfyError):
    """409: the job exists but is not in the state the request needs (e.g. releasing a job not reserved)."""


class PayloadTooLarge(LmstfyError):
    """413: a job's data (or a bulk) over the server's 1 MiB."""


class Throttled(LmstfyError):
    """429: the token's rate limit is reached; the request did nothing and may be sent again later."""


class Unavailable(LmstfyError):
    """The server answered 503 (its storage is away) or could not be reached at all.

    `sent` is False only when the failure proves the request never reached the server (the
    connection was refused or never opened): then it certainly did nothing. Otherwise it may or
    may not have been carried out.
    """

    def __init__(
        self, message: str, status: int | None = None, request_id: str | None = None, *, sent: bool = True
    ) -> None:
        super().__init__(message, status, request_id)
        self.sent = sent


class ServerError(LmstfyError):
    """Any other 5xx, or an answer the client cannot read."""


class Bury(Exception):
    """Raised by a worker's handler: the job goes to its queue's dead letter now, `reason` as its last error.

    Not an error of the client: it is how a handler says a job can never succeed (bad input,
    say), so that it is not tried again.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


BY_STATUS: dict[int, type[LmstfyError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: Throttled,
    503: Unavailable,
}


def error_for(status: int, message: str, request_id: str | None = None) -> LmstfyError:
    kind = BY_STATUS.get(status, ServerError if status >= 500 else LmstfyError)
    return kind(message, status, request_id)
