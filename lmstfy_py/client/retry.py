"""When a failed request is sent again, and after how long.

Two kinds of failure are retried, with exponential backoff and jitter:
- the request provably never reached the server (connection refused or not opened in time,
  no pooled connection free): every request, since nothing was done;
- the server answered 503 (its storage is away), or the answer was lost after the request was
  sent (a reset connection, a read timeout): only a `repeatable` call, since the server may
  have carried it out. A publish without a business job_id is not repeatable: repeated, it
  could store the job twice. With a job_id it is: the repeat answers "duplicate".
Anything else (4xx, a 5xx other than 503) is the caller's to handle.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpcore

from lmstfy_py.client.errors import LmstfyError, Unavailable

# Every failure httpcore raises for a request that got no answer.
TRANSPORT_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)
# The request bytes are written only after these steps succeeded.
NEVER_SENT = (httpcore.ConnectError, httpcore.ConnectTimeout, httpcore.PoolTimeout)
# Failures of the network or of the server's side; anything else (a scheme httpcore does not
# speak, a proxy refusing, our own request malformed) is not retried.
UNREACHABLE = (httpcore.NetworkError, httpcore.TimeoutException, httpcore.RemoteProtocolError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """`retries` more attempts after the first, the n-th (from 0) after about backoff * 2^n seconds
    (at most `max_backoff`; each drawn between half and all of that, so that many clients
    coming back from one outage do not arrive together)."""

    retries: int = 5
    backoff: float = 0.1
    max_backoff: float = 2.0

    def delay(self, attempt: int, failure: LmstfyError, repeatable: bool) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None: give up and raise `failure`."""
        if attempt >= self.retries or not isinstance(failure, Unavailable):
            return None
        if failure.sent and not repeatable:
            return None
        return backoff_delay(attempt, self.backoff, self.max_backoff)


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    return float(min(cap, base * 2**attempt)) * random.uniform(0.5, 1.0)


def transport_failure(exc: Exception) -> LmstfyError:
    """The client's exception for a request that got no answer."""
    if not isinstance(exc, UNREACHABLE):
        return LmstfyError(f"request failed: {_describe(exc)}")
    return Unavailable(f"cannot reach the server: {_describe(exc)}", sent=not isinstance(exc, NEVER_SENT))


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
