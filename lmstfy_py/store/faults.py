"""Which Redis errors mean "storage unavailable", and why: for the 503s of the web layer, the
background loops' quiet retries and the pools' health checks alike.

Anything else a Redis call raises (a script error, a wrong type) is a bug or bad data, never
retried quietly.
"""

from __future__ import annotations

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MaxConnectionsError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class Overloaded(RedisError):
    """More commands wait for Redis in this process than it may queue (store/pipelined.py)."""


# Most specific first: BusyLoadingError and MaxConnectionsError are ConnectionErrors, and the
# builtin TimeoutError an OSError. The reasons stay generic: Redis addresses are not a client's business.
_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (BusyLoadingError, "redis loading"),
    (MaxConnectionsError, "too many redis connections"),
    (Overloaded, "too many commands waiting for redis"),
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
_REPLIES = {
    "LOADING": "redis loading",  # as redis-py's BusyLoadingError, when a client did not map it
    "MISCONF": "redis cannot persist its data",  # e.g. its disk is full: it refuses writes
    "BUSY": "redis is busy running a script",
}


def unreachable(exc: BaseException) -> bool:
    """Redis did not answer at all (refused, lost, timed out, still loading): what a pool's health
    check notices and reports by itself, rather than Redis answering that it cannot do something."""
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)) and not isinstance(
        exc, (MaxConnectionsError, Overloaded)
    )


def outage_reason(exc: BaseException) -> str | None:
    """Why Redis could not do what was asked, or None when `exc` is not a storage outage."""
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    if isinstance(exc, ResponseError):
        return _REPLIES.get(str(exc).split(" ", 1)[0])
    return None
