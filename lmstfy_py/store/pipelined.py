"""An auto-pipelining Redis client for the script calls of standalone pools.

redis-py gives every concurrent command a pooled connection of its own, a timeout context, a
write and a read: ~145 µs of CPU per EVALSHA with redis-py 8.1 under 32 concurrent callers,
against 9-10 µs here (python -m benchmarks.bench_redis_client, 2-core VM). Here the commands
issued in one event-loop turn go out in one write on one connection, and the replies, parsed by
hiredis, are handed to their callers in order.
Redis runs one command at a time anyway, so one connection per process costs it nothing.

A caller is answered only after Redis replied, as with redis-py: a command still in this
client's buffer when the process dies was never acknowledged to anyone. Only commands that
return at once may come through here: a blocking one (BRPOP) would hold up every caller
queued behind it, so those keep their redis-py client.

Faults raise redis-py's exceptions, which the web layer answers with 503. A connection refused
or lost raises ConnectionError and the next call connects again: a connection that Redis
closes while idle (a restart) is seen closing by the event loop at once, so the next call never
writes to it. No command is ever sent twice: one that was written may have run. A reply overdue
by `timeout_s` fails every command in flight with TimeoutError and drops the connection, since
its late replies would answer the wrong callers.

Writes honour the transport's flow control: while Redis does not read fast enough, commands
wait in this client's buffer, and what one process may queue is bounded (MAX_WAITING commands,
MAX_UNSENT_BYTES unwritten): beyond that a command fails at once with `Overloaded`.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Hashable, Sequence
from typing import Any, cast

import hiredis
from redis.asyncio import SSLConnection
from redis.asyncio.connection import parse_url  # not re-exported by redis.asyncio; no public equivalent
from redis.exceptions import (
    BusyLoadingError,
    MasterDownError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lmstfy_py import tasks
from lmstfy_py.store.counted import CommandCounter, ignore
from lmstfy_py.store.faults import Overloaded
from lmstfy_py.store.scripts import Arg, Command

# What one process may have waiting for Redis: beyond it a command is refused at once (503)
# rather than queued without bound behind a Redis that does not keep up.
MAX_WAITING = 100_000
MAX_UNSENT_BYTES = 64 << 20

# The error replies the engine and the web layer tell apart (web/errors.py), as redis-py's classes;
# others stay ResponseError with their code in the message (web/errors.py reads MISCONF, BUSY).
_ERRORS: dict[str, type[RedisError]] = {
    "NOSCRIPT": NoScriptError,
    "READONLY": ReadOnlyError,
    "LOADING": BusyLoadingError,
    "OOM": OutOfMemoryError,
    "MASTERDOWN": MasterDownError,
}


def pack(command: Command) -> bytes:
    """One command in RESP, as Redis reads it (hiredis's encoder, in C: 3x faster than ours in Python)."""
    # hiredis's stub types the argument as a 1-tuple; it takes any number of items.
    packed: bytes = hiredis.pack_command(cast(Any, tuple(command)))
    return packed


def _error_of(reply: ResponseError) -> RedisError:
    message = str(reply)
    code = message.split(" ", 1)[0]
    cls = _ERRORS.get(code)
    return cls(message.removeprefix(code).lstrip()) if cls else reply


class _Wire(asyncio.Protocol):
    """One connection: a write buffer flushed once per loop turn, and the callers awaiting replies, oldest first."""

    def __init__(self, timeout_s: float, max_waiting: int, max_unsent_bytes: int) -> None:
        self.timeout_s = timeout_s
        self.max_waiting = max_waiting
        self.max_unsent_bytes = max_unsent_bytes
        self.loop = asyncio.get_running_loop()
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        self.outgoing: list[bytes] = []
        self.outgoing_bytes = 0
        self.transport: asyncio.Transport | None = None
        self.failure: RedisError | None = None  # set once the connection is unusable
        self.paused = False  # the transport's buffer is full: Redis is not reading fast enough
        self._flush_planned = False
        self._watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"connection to redis lost: {exc or 'closed by redis'}"))

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                future, _ = self.waiting.popleft()
                if future.done():  # its caller was cancelled; the reply still takes its turn
                    continue
                if isinstance(reply, ResponseError):
                    future.set_exception(_error_of(reply))
                else:
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # garbage, or a reply nobody asked for
            self._fail(RedisConnectionError(f"unreadable reply from redis: {exc!r}"))

    def send(self, packed: bytes) -> asyncio.Future[Any]:
        """Queues a command for this turn's write; the future gets its reply."""
        if self.failure is not None:
            raise type(self.failure)(*self.failure.args)
        if len(self.waiting) >= self.max_waiting or self.outgoing_bytes + len(packed) > self.max_unsent_bytes:
            raise Overloaded(f"{len(self.waiting)} commands ({self.outgoing_bytes} bytes unsent) wait for redis")
        if not self._flush_planned:
            self._flush_planned = True
            self.loop.call_soon(self._flush)
        self.outgoing.append(packed)
        self.outgoing_bytes += len(packed)
        future = self.loop.create_future()
        self.waiting.append((future, self.loop.time()))
        if self._watchdog is None:
            self._watchdog = self.loop.call_later(self.timeout_s, self._check_deadline)
        return future

    def close(self) -> None:
        self._fail(RedisConnectionError("connection to redis closed"))

    def _flush(self) -> None:
        self._flush_planned = False
        # While the transport is paused the commands wait here, bounded by MAX_UNSENT_BYTES, and the
        # watchdog fails them all if Redis reads nothing for timeout_s.
        if self.paused or not self.outgoing or self.transport is None or self.failure is not None:
            return
        self.transport.write(b"".join(self.outgoing))
        self.outgoing.clear()
        self.outgoing_bytes = 0

    def _check_deadline(self) -> None:
        # One timer per connection, not per command: it looks at the oldest command in flight.
        self._watchdog = None
        if not self.waiting:
            return
        left = self.waiting[0][1] + self.timeout_s - self.loop.time()
        if left > 0:
            self._watchdog = self.loop.call_later(left, self._check_deadline)
        else:
            self._fail(RedisTimeoutError(f"no reply from redis within {self.timeout_s:g} s"))

    def _fail(self, error: RedisError) -> None:
        if self.failure is None:
            self.failure = error
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiting, self.waiting = self.waiting, collections.deque()
        self.outgoing.clear()
        self.outgoing_bytes = 0
        for future, _ in waiting:
            if not future.done():
                # One exception object per caller: raised in many tasks, a shared one would pile up their tracebacks.
                future.set_exception(type(error)(*error.args))
        if self.transport is not None:
            self.transport.abort()


class PipelinedRedis:
    """The few calls the engine's script steps make (execute_command, pipeline, script_load), auto-pipelined."""

    def __init__(
        self,
        url: str,
        connect_timeout_s: float = 1.0,
        timeout_s: float = 2.0,
        max_waiting: int = MAX_WAITING,
        max_unsent_bytes: int = MAX_UNSENT_BYTES,
        counter: CommandCounter = ignore,
    ) -> None:
        """`counter` is told of each command (store/counted.py): a batch of execute_many is one, "pipeline"."""
        options = parse_url(url)
        if options.get("connection_class") is SSLConnection:
            raise ValueError("TLS (rediss://) is not supported by the pipelined client")
        self.path: str | None = options.get("path")
        self.host: str = options.get("host", "localhost")
        self.port: int = options.get("port", 6379)
        self.connect_timeout_s = connect_timeout_s
        self.timeout_s = timeout_s
        self.bounds = (max_waiting, max_unsent_bytes)
        self.counter = counter
        # Sent first on every new connection, pipelined with whatever waits for it.
        self.hello: list[Command] = []
        if options.get("password"):
            username = options.get("username")
            self.hello.append(("AUTH", username, options["password"]) if username else ("AUTH", options["password"]))
        if options.get("db"):
            self.hello.append(("SELECT", options["db"]))
        self.functions = True  # calls the steps as functions until its Redis refuses them (store/scripts.py)
        self._wire: _Wire | None = None
        self._connecting: dict[Hashable, asyncio.Future[_Wire]] = {}  # the connect attempt in flight

    @staticmethod
    def supports(url: str) -> bool:
        """Whether this client can serve `url` (redis:// and unix://, not TLS)."""
        return url.startswith(("redis://", "unix://"))

    async def execute_command(self, *command: Arg) -> Any:
        packed = pack(command)
        started = time.perf_counter()
        try:
            reply = await (await self._connected()).send(packed)
        except Exception:
            self.counter(str(command[0]), True, time.perf_counter() - started)
            raise
        self.counter(str(command[0]), False, time.perf_counter() - started)
        return reply

    async def execute_many(self, commands: Sequence[Command], raise_on_error: bool = True) -> list[Any]:
        """The commands in one write; their replies in order, error replies in place unless `raise_on_error`."""
        packed = [pack(command) for command in commands]
        started = time.perf_counter()
        try:
            replies = await self._send_all(packed)
        except Exception:
            self.counter("pipeline", True, time.perf_counter() - started)
            raise
        failed = any(isinstance(reply, Exception) for reply in replies)
        self.counter("pipeline", failed, time.perf_counter() - started)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def pipeline(self, transaction: bool = False) -> Batch:
        if transaction:
            raise ValueError("the pipelined client does not run MULTI/EXEC transactions")
        return Batch(self)

    async def script_load(self, source: str) -> str:
        sha: bytes = await self.execute_command("SCRIPT", "LOAD", source)
        return sha.decode()

    async def aclose(self) -> None:
        for attempt in self._connecting.values():
            attempt.cancel()
        if self._wire is not None:
            self._wire.close()
            self._wire = None

    async def _send_all(self, packed: Sequence[bytes]) -> list[Any]:
        wire = await self._connected()
        futures = [wire.send(p) for p in packed]
        replies = await asyncio.gather(*futures, return_exceptions=True)
        # A lost or timed-out connection fails the whole batch: raise it (the caller retries a lost one).
        for reply in replies:
            if isinstance(reply, (RedisConnectionError, RedisTimeoutError)):
                raise reply
        return replies

    async def _connected(self) -> _Wire:
        wire = self._wire
        if wire is not None and wire.failure is None:
            return wire
        # One attempt at a time, its outcome shared (tasks.shared): callers queued behind a lock
        # would each wait out their own connect timeout, one after another, if Redis did not answer.
        return await tasks.shared(self._connecting, "connect", self._connect)

    async def _connect(self) -> _Wire:
        loop = asyncio.get_running_loop()
        where = self.path or f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if self.path:
                    _, wire = await loop.create_unix_connection(lambda: _Wire(self.timeout_s, *self.bounds), self.path)
                else:
                    _, wire = await loop.create_connection(
                        lambda: _Wire(self.timeout_s, *self.bounds), self.host, self.port
                    )
        except (OSError, TimeoutError) as exc:
            raise RedisConnectionError(f"error connecting to redis at {where}: {exc!r}") from exc
        if self.hello:
            try:
                await asyncio.gather(*(wire.send(pack(command)) for command in self.hello))
            except ResponseError as exc:  # a wrong password or db: as redis-py's AuthenticationError, a 503
                wire.close()
                raise RedisConnectionError(f"redis at {where} refused the connection: {exc}") from exc
            except BaseException:
                wire.close()
                raise
        self._wire = wire
        return wire


class Batch:
    """What run_pipeline needs of a redis-py pipeline: queue raw commands, then execute them in one write."""

    def __init__(self, client: PipelinedRedis) -> None:
        self.client = client
        self.commands: list[Command] = []

    def execute_command(self, *command: Arg) -> None:
        self.commands.append(command)

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        return await self.client.execute_many(self.commands, raise_on_error)
