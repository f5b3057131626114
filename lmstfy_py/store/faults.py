"""Which Redis errors mean "storage unavailable", and why: for the 503s of the web layer, the
background loops' quiet retries and the pools' health checks alike.

Anything else a Redis call raises (a script error, a wrong type) is a bug or bad data, never
retried quietly. Of the builtin exceptions only a socket's failures count (ConnectionError:
refused, reset; TimeoutError): another OSError (a time zone file, a full metrics disk) is no
Redis outage. What redis-py lets out of a call as another exception than a RedisError (a
connection closed under a command in a Cluster failover raises AttributeError or RuntimeError)
is turned into one where the call is made (`call_failure`, used by store/counted.py).
"""

from __future__ import annotations

import asyncio
import os

import redis
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MaxConnectionsError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class Overloaded(RedisError):
    """More commands wait for Redis in this process than it may queue (store/pipelined.py)."""


class ConnectionBroken(RedisConnectionError):
    """redis-py lost a connection under a command and raised something else than a RedisError."""


# Most specific first: BusyLoadingError and MaxConnectionsError are ConnectionErrors (redis-py's).
# The reasons stay generic: Redis addresses are not a client's business.
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
    (ConnectionError, "cannot connect to redis"),  # the builtin one: refused, reset, broken pipe
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
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)) and not isinstance(
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


_REDIS_PY = os.path.dirname(redis.__file__) + os.sep
_ASYNCIO = os.path.dirname(asyncio.__file__) + os.sep
# What redis-py's asyncio clients raise, besides RedisErrors, when a connection is closed or torn
# down under a command: in a Cluster failover one task's CLUSTERDOWN makes redis-py close every
# node's connections while other tasks use them ("'NoneType' object has no attribute
# 'writelines'", uvloop's "unable to perform operation on <TCPTransport closed=True>"), and a
# socket error it did not wrap is an OSError (the builtin TimeoutError included).
_BROKEN_CONNECTION = (AttributeError, RuntimeError, OSError)


def call_failure(exc: BaseException) -> RedisError | None:
    """The storage failure `exc`, raised by a call into a redis-py client, stands for; None when it
    stands for itself (a RedisError already, or a bug of ours).

    Only what redis-py's own code raised (the innermost frame of its traceback, the event loop
    beneath it aside, lies in redis-py) is translated: an AttributeError in our code that redis-py
    calls back (a connection class of store/pools.py) stays a bug.
    """
    if isinstance(exc, RedisError):
        return None
    if isinstance(exc, SlotNotCoveredError):  # no node serves the slot now: a master died, its replica not yet up
        return ClusterDownError(f"redis cluster does not serve the slot: {exc}")
    if isinstance(exc, _BROKEN_CONNECTION) and _raised_by_redis_py(exc):
        return ConnectionBroken(f"connection to redis lost during a command: {exc!r}")
    return None


def topology_failure(exc: BaseException) -> RedisError | None:
    """The storage failure a RedisCluster's discovery of its nodes (`initialize`) raised: no node
    answered, or the nodes disagree or leave slots unserved (mid-failover); else as call_failure."""
    if isinstance(exc, RedisClusterException) and not isinstance(exc, SlotNotCoveredError):
        if isinstance(exc.__cause__, (RedisConnectionError, RedisTimeoutError, OSError)):
            return ConnectionBroken(f"no redis cluster node answers: {exc.__cause__!r}")
        return ClusterDownError(f"redis cluster topology unsettled: {exc}")
    return call_failure(exc)


def _raised_by_redis_py(exc: BaseException) -> bool:
    innermost = None
    traceback = exc.__traceback__
    while traceback is not None:
        filename = traceback.tb_frame.f_code.co_filename
        if not filename.startswith(_ASYNCIO) and not filename.endswith(".pyx"):  # uvloop is Cython
            innermost = filename
        traceback = traceback.tb_next
    return innermost is not None and innermost.startswith(_REDIS_PY)
