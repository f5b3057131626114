"""redis-py clients that report every command they send, as lmstfy >= 1.0.11's go-redis hook does.

A CommandCounter is told (command name, failed, seconds) of each command once its reply or its
error came: a pipeline is one command, "pipeline", failed if any of its commands failed. A
blocking command (BRPOP) counts its wait, as lmstfy's does. A command cancelled before its
answer (a stopping server) is not counted. The store does not know what a counter does with
it (metrics/redis_commands.py tallies them into lmstfy's families). Standalone pools' script
steps go through store/pipelined.py, which counts the same way.

They are also where a Redis call is made, so where what redis-py lets out of a call as another
exception than a RedisError becomes one (store/faults.py `call_failure`): a storage failure is
a 503 and a background loop's quiet retry, never a 500 or a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster

from lmstfy_py.store.faults import call_failure, topology_failure

# (command name as sent, failed, seconds from send to answer)
CommandCounter = Callable[[str, bool, float], None]


def ignore(command: str, failed: bool, seconds: float) -> None:
    """The counter of a client that counts nothing (tests, benchmarks)."""


def _name(command: Any) -> str:
    return command.decode() if isinstance(command, bytes) else str(command)


def _raise_as_storage_failure(exc: Exception) -> NoReturn:
    """Raises `exc`, or the storage failure it stands for (store/faults.py), chained to it."""
    failure = call_failure(exc)
    if failure is None:
        raise exc
    raise failure from exc


def _any_failed(replies: list[Any]) -> bool:
    return any(isinstance(reply, Exception) for reply in replies)


class CountedRedis(Redis):
    """A standalone or Sentinel client that counts: made by `owning`."""

    counter: CommandCounter  # set by `owning`; a class-level default would be bound as a method
    functions = True  # calls the steps as functions until its Redis refuses them (store/scripts.py)

    @classmethod
    def owning(cls, pool: ConnectionPool, counter: CommandCounter) -> CountedRedis:
        """A client that owns `pool` (closes it when closed: redis-py's public Redis.from_pool) and counts."""
        client = cls.from_pool(pool)
        assert isinstance(client, CountedRedis)
        client.counter = counter
        return client

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except Exception as exc:
            self.counter(_name(args[0]), True, time.perf_counter() - started)
            _raise_as_storage_failure(exc)
        self.counter(_name(args[0]), False, time.perf_counter() - started)
        return reply

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return CountedPipeline(self.counter, self.connection_pool, self.response_callbacks, transaction, shard_hint)


class CountedPipeline(Pipeline):
    def __init__(self, counter: CommandCounter, *args: Any) -> None:
        super().__init__(*args)
        self.counter = counter

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        started = time.perf_counter()
        try:
            replies: list[Any] = await super().execute(raise_on_error)
        except Exception as exc:
            self.counter("pipeline", True, time.perf_counter() - started)
            _raise_as_storage_failure(exc)
        self.counter("pipeline", _any_failed(replies), time.perf_counter() - started)
        return replies


class CountedCluster(RedisCluster):
    """A Redis Cluster client that counts (under the pool's one node label: its configured nodes)."""

    # EVALSHA, not FCALL: redis-py routes an FCALL by asking a node for its keys first (COMMAND
    # GETKEYS, a round trip per call), an EVALSHA by its keys itself (store/scripts.py).
    functions = False

    def __init__(self, counter: CommandCounter, **options: Any) -> None:
        super().__init__(**options)
        self.counter = counter

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = await super().execute_command(*args, **kwargs)
        except Exception as exc:
            self.counter(_name(args[0]), True, time.perf_counter() - started)
            _raise_as_storage_failure(exc)
        self.counter(_name(args[0]), False, time.perf_counter() - started)
        return reply

    async def initialize(self, *args: Any, **kwargs: Any) -> RedisCluster:
        # Called by each command while the client relearns the nodes (after a failure), and directly
        # by the metrics collector: mid-failover the nodes disagree, or none answers, for a while.
        try:
            return await super().initialize(*args, **kwargs)
        except Exception as exc:
            failure = topology_failure(exc)
            if failure is None:
                raise
            raise failure from exc

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # refused there, as it should be
        # (redis-py's types call ClusterPipeline abstract; RedisCluster.pipeline makes one all the same)
        return CountedClusterPipeline(self.counter, self, transaction)  # type: ignore[abstract]


class CountedClusterPipeline(ClusterPipeline):
    def __init__(self, counter: CommandCounter, client: RedisCluster, transaction: Any | None) -> None:
        super().__init__(client, transaction)
        self.counter = counter

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        started = time.perf_counter()
        try:
            replies: list[Any] = await super().execute(raise_on_error, allow_redirections)
        except Exception as exc:
            self.counter("pipeline", True, time.perf_counter() - started)
            _raise_as_storage_failure(exc)
        self.counter("pipeline", _any_failed(replies), time.perf_counter() - started)
        return replies
