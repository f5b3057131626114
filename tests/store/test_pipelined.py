"""The auto-pipelining client of standalone pools (store/pipelined.py), on real Redis servers.

What the engine relies on: every caller gets its own reply whatever else is in flight, the
commands of one loop turn reach Redis together, and faults look as redis-py's do (a lost
connection raises ConnectionError and the next call reconnects; a hung Redis raises
TimeoutError). Fault tests run on a private Redis so they can stop, freeze and kill it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.faults import Overloaded
from lmstfy_py.store.pipelined import PipelinedRedis, pack
from lmstfy_py.store.scripts import Script
from lmstfy_py.types import NewJob

ECHO = "return ARGV[1]"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis", extra_args=["--enable-debug-command", "yes"])
    server.start()
    yield server
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)  # a frozen server would not stop
    server.stop()


@pytest.fixture
async def private_client(private_redis: RedisProcess) -> AsyncIterator[PipelinedRedis]:
    pipelined = PipelinedRedis(private_redis.url)
    yield pipelined
    await pipelined.aclose()


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[PipelinedRedis]:
    pipelined = PipelinedRedis(redis_url)
    yield pipelined
    await pipelined.aclose()


def reads_processed(server: redis.Redis) -> int:
    return int(server.info("stats")["total_reads_processed"])


def test_pack_is_resp() -> None:
    assert pack(("SET", b"k\r\n", 5, 1.5)) == b"*4\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$1\r\n5\r\n$3\r\n1.5\r\n"


async def test_every_concurrent_caller_gets_its_own_reply(client: PipelinedRedis) -> None:
    replies = await asyncio.gather(*(client.execute_command("EVAL", ECHO, 0, f"caller-{i}") for i in range(500)))
    assert replies == [f"caller-{i}".encode() for i in range(500)]


async def test_the_commands_of_one_turn_reach_redis_together(
    private_redis: RedisProcess, private_client: PipelinedRedis
) -> None:
    await private_client.execute_command("PING")  # connected
    with private_redis.client() as server:
        before = reads_processed(server)
        replies = await asyncio.gather(*(private_client.execute_command("INCR", "counter") for _ in range(200)))
        reads = reads_processed(server) - before - 1  # minus the INFO of `before`
    assert sorted(replies) == list(range(1, 201))
    # redis-py would make Redis read 200 times, once per command; one write is read in a few.
    assert reads <= 5, f"Redis read {reads} times for 200 commands of one turn"


async def test_each_job_step_of_the_engine_is_one_round_trip(private_redis: RedisProcess) -> None:
    """Issue 5: one round trip per publish, bulk publish of 64, consume (any count) and ACK."""
    engine = pools.engine("default", PoolConfig("default", url=private_redis.url))
    # Warm-up: registers the namespace (an SADD every 10 s) and loads each script (NOSCRIPT once per Redis).
    await engine.publish("ns", "q", NewJob(b"warm-up"))
    await engine.ack("ns", "q", (await engine.consume("ns", ["q"], 60_000, 0, 1))[0].job_id)
    with private_redis.client() as server:

        async def reads_of(step: Awaitable[object]) -> int:
            before = reads_processed(server)
            await step
            return reads_processed(server) - before - 1  # minus the INFO of `before`

        assert await reads_of(engine.publish("ns", "q", NewJob(b"one"), None)) == 1
        assert await reads_of(engine.publish("ns", "q", NewJob(b"later", delay_ms=60_000))) == 1  # + its ZADD
        # 64 scripts in one write, which Redis takes in at most 16 KiB per read.
        assert await reads_of(engine.publish_many("ns", "q", [NewJob(b"b")] * 64)) <= 2
        assert await reads_of(engine.consume("ns", ["q"], 60_000, 0, 1)) == 1
        consumed = await engine.consume("ns", ["q"], 60_000, 0, 64)
        assert len(consumed) == 64
        assert await reads_of(engine.ack("ns", "q", consumed[0].job_id)) == 1
        assert await reads_of(engine.ack_many("ns", "q", [job.job_id for job in consumed[1:]])) == 1
        before = reads_processed(server)
        await engine.consume("ns", ["q"], 60_000, 0, 100)
        assert reads_processed(server) - before - 1 == 1
    await engine.close()


async def test_an_error_reply_goes_to_its_caller_only(client: PipelinedRedis) -> None:
    replies = await asyncio.gather(
        client.execute_command("EVAL", ECHO, 0, "before"),
        client.execute_command("EVALSHA", "0" * 40, 0),
        client.execute_command("LPUSH"),  # wrong number of arguments
        client.execute_command("EVAL", ECHO, 0, "after"),
        return_exceptions=True,
    )
    assert replies[0] == b"before" and replies[3] == b"after"
    assert isinstance(replies[1], NoScriptError)
    assert type(replies[2]) is ResponseError and "wrong number of arguments" in str(replies[2])


async def test_a_script_is_loaded_when_redis_does_not_know_it(client: PipelinedRedis, redis_url: str) -> None:
    script = Script("seven", "return 7 + #KEYS")
    client.functions = False  # as once its Redis refused FCALL (store/scripts.py)
    with redis.Redis.from_url(redis_url) as server:
        server.script_flush()
    assert await script(client, ["a", "b"], []) == 9
    assert await client.execute_command("SCRIPT", "EXISTS", script.sha) == [1]


async def test_a_function_is_loaded_when_redis_does_not_know_it(client: PipelinedRedis, redis_url: str) -> None:
    script = Script("seven", "return 7 + #KEYS")
    with redis.Redis.from_url(redis_url) as server:
        server.function_flush()
        server.script_flush()
    assert await script(client, ["a", "b"], []) == 9
    assert await script(client, ["a"], []) == 8
    with redis.Redis.from_url(redis_url) as server:
        libraries = [dict(zip(entry[::2], entry[1::2], strict=True)) for entry in server.function_list()]
        assert [library[b"library_name"].decode() for library in libraries] == [script.library.name]
        assert server.script_exists(script.sha) == [False]  # never sent as a script


async def test_a_batch_keeps_error_replies_in_place(client: PipelinedRedis) -> None:
    batch = client.pipeline()
    batch.execute_command("SET", "batch-key", "v")
    batch.execute_command("LPUSH", "batch-key", "x")  # WRONGTYPE
    batch.execute_command("GET", "batch-key")
    ok, wrong, value = await batch.execute(raise_on_error=False)
    assert ok == b"OK" and value == b"v" and isinstance(wrong, ResponseError)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await client.execute_many([("GET", "batch-key"), ("LPUSH", "batch-key", "x")])


async def test_a_cancelled_caller_does_not_shift_the_replies(private_client: PipelinedRedis) -> None:
    slow = asyncio.create_task(private_client.execute_command("DEBUG", "SLEEP", "0.3"))
    await asyncio.sleep(0.05)
    queued_behind = asyncio.create_task(private_client.execute_command("EVAL", ECHO, 0, "mine"))
    await asyncio.sleep(0.05)
    slow.cancel()
    assert await queued_behind == b"mine"
    assert await private_client.execute_command("EVAL", ECHO, 0, "next") == b"next"


async def test_a_lost_connection_fails_what_was_in_flight_and_the_next_call_reconnects(
    private_redis: RedisProcess,
    private_client: PipelinedRedis,
) -> None:
    in_flight = asyncio.create_task(private_client.execute_command("DEBUG", "SLEEP", "5"))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    private_redis.kill()
    with pytest.raises(RedisConnectionError):
        await in_flight
    assert time.monotonic() - started < 1.0
    # Down: each call fails at once, never hangs.
    started = time.monotonic()
    with pytest.raises(RedisConnectionError):
        await private_client.execute_command("PING")
    assert time.monotonic() - started < 1.0
    private_redis.start()
    assert await private_client.execute_command("EVAL", ECHO, 0, "back") == b"back"


async def test_an_idle_connection_dropped_by_a_restart_is_replaced_on_the_next_call(
    private_redis: RedisProcess,
    private_client: PipelinedRedis,
) -> None:
    assert await private_client.execute_command("PING") == b"PONG"
    # In a thread, so that the event loop runs on meanwhile as a server's does and sees the old
    # connection close: the next call then knows to connect anew before writing.
    await asyncio.to_thread(private_redis.restart)
    assert await private_client.execute_command("PING") == b"PONG"


@pytest.fixture
def unresponsive_port() -> Iterator[int]:
    """A port whose connection attempts get no answer, as behind a network partition: Linux drops
    the SYNs of a listener whose accept queue is full."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
    yield port
    for open_socket in (*fillers, listener):
        open_socket.close()


async def test_callers_share_one_connect_attempt_to_an_unresponsive_redis(unresponsive_port: int) -> None:
    pipelined = PipelinedRedis(f"redis://127.0.0.1:{unresponsive_port}", connect_timeout_s=0.3)
    started = time.monotonic()
    replies = await asyncio.gather(*(pipelined.execute_command("PING") for _ in range(20)), return_exceptions=True)
    waited = time.monotonic() - started
    await pipelined.aclose()
    assert all(isinstance(reply, RedisConnectionError) for reply in replies), replies
    assert len({id(reply) for reply in replies}) == 20  # each caller its own exception
    # One shared attempt: ~0.3 s. Attempts one after another would take 20 x 0.3 s.
    assert waited < 3.0, waited


async def test_a_hung_redis_times_out_every_command_in_flight(private_redis: RedisProcess) -> None:
    pipelined = PipelinedRedis(private_redis.url, timeout_s=0.3)
    assert await pipelined.execute_command("SET", "k", "before") == b"OK"
    assert private_redis.pid is not None
    os.kill(private_redis.pid, signal.SIGSTOP)
    # Should this test die before its `finally` (a hard timeout), a frozen Redis would outlive the
    # session: it cannot act on the SIGTERM its parent's death sends. This unfreezes it regardless.
    guard = subprocess.Popen(["sh", "-c", f"sleep 10; kill -CONT {private_redis.pid}"], start_new_session=True)
    try:
        started = time.monotonic()
        replies = await asyncio.gather(
            *(pipelined.execute_command("EVAL", ECHO, 0, i) for i in range(3)), return_exceptions=True
        )
        waited = time.monotonic() - started
    finally:
        os.kill(private_redis.pid, signal.SIGCONT)
        os.killpg(guard.pid, signal.SIGKILL)  # its sleep too: it leads a session of its own
        guard.wait()
    assert all(isinstance(reply, RedisTimeoutError) for reply in replies), replies
    assert 0.25 <= waited < 1.5
    # The late replies of the dropped connection reach nobody: a new caller gets its own.
    assert await pipelined.execute_command("EVAL", ECHO, 0, "fresh") == b"fresh"
    assert await pipelined.execute_command("GET", "k") == b"before"
    await pipelined.aclose()


def frozen(server: RedisProcess) -> subprocess.Popen[bytes]:
    """SIGSTOPs `server`; the guard returned unfreezes it in 10 s should the test die first (kill it to cancel)."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    return subprocess.Popen(["sh", "-c", f"sleep 10; kill -CONT {server.pid}"], start_new_session=True)


def thaw(server: RedisProcess, guard: subprocess.Popen[bytes]) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGCONT)
    os.killpg(guard.pid, signal.SIGKILL)  # its sleep too: it leads a session of its own
    guard.wait()


async def test_a_command_that_timed_out_is_not_sent_again(private_redis: RedisProcess) -> None:
    """It may have run: Redis reads it when it wakes up, and a second copy would run twice.

    Both clients of a pool: the pipelined one and redis-py's as store/pools.py configures it
    (which retried timeouts, with a 5 s timeout: a frozen Redis held a request 10 s).
    """
    requests, blocking = pools.connect(PoolConfig("default", url=private_redis.url))
    pipelined = pools.script_client(PoolConfig("default", url=private_redis.url))
    assert pipelined is not None
    assert await pipelined.execute_command("PING") == b"PONG" and await requests.ping()
    guard = frozen(private_redis)
    try:
        for client in (pipelined, requests):
            started = time.monotonic()
            with pytest.raises(RedisTimeoutError):
                await client.execute_command("INCR", "runs")
            assert time.monotonic() - started < pools.REQUEST_TIMEOUT_S + 0.5
    finally:
        thaw(private_redis, guard)
    await asyncio.sleep(0.2)  # Redis runs what it had read before it froze
    assert await pipelined.execute_command("GET", "runs") == b"2"  # one INCR from each client
    for client in (pipelined, requests, blocking):
        await client.aclose()


async def test_what_waits_for_a_redis_that_does_not_read_is_bounded(private_redis: RedisProcess) -> None:
    """Flow control: once the socket's buffers are full, commands wait unwritten in the client, up to
    its byte bound; past it, and past its count bound, a command fails at once (503), never queues."""
    pipelined = PipelinedRedis(private_redis.url, timeout_s=2.0, max_waiting=500, max_unsent_bytes=4 << 20)
    assert await pipelined.execute_command("PING") == b"PONG"
    value = b"x" * (256 << 10)
    guard = frozen(private_redis)
    try:
        started = time.monotonic()
        # 128 MiB of SETs: far more than loopback socket buffers hold, and than the client may queue.
        sets = [asyncio.ensure_future(pipelined.execute_command("SET", f"k{i}", value)) for i in range(512)]
        await asyncio.sleep(0.3)
        refused = [s for s in sets if s.done() and isinstance(s.exception(), Overloaded)]
        wire = pipelined._wire
        assert wire is not None and wire.paused  # the transport asked us to stop writing
        assert wire.outgoing_bytes <= 4 << 20
        assert len(refused) > 256  # refused at once, not after the 2 s timeout
        assert time.monotonic() - started < 1.0
        pings = await asyncio.gather(*(pipelined.execute_command("PING") for _ in range(600)), return_exceptions=True)
        assert any(isinstance(reply, Overloaded) for reply in pings)
    finally:
        thaw(private_redis, guard)
    await asyncio.gather(*sets, return_exceptions=True)
    assert await pipelined.execute_command("PING") == b"PONG"  # afterwards it serves again
    await pipelined.aclose()


async def test_password_username_and_db_come_from_the_url(private_redis: RedisProcess) -> None:
    with private_redis.client() as server:
        server.execute_command("ACL", "SETUSER", "worker", "on", ">w0rker", "~*", "+@all")
        server.config_set("requirepass", "s3cret")
    base = f"127.0.0.1:{private_redis.port}"
    by_password, by_user = (
        PipelinedRedis(f"redis://:s3cret@{base}/2"),
        PipelinedRedis(f"redis://worker:w0rker@{base}/3"),
    )
    await by_password.execute_command("SET", "where", "db2")
    await by_user.execute_command("SET", "where", "db3")
    for db, expected in ((2, b"db2"), (3, b"db3")):
        with redis.Redis(host="127.0.0.1", port=private_redis.port, password="s3cret", db=db) as server:
            assert server.get("where") == expected
    wrong = PipelinedRedis(f"redis://:nope@{base}/0")
    with pytest.raises(RedisConnectionError, match="refused"):
        await wrong.execute_command("PING")
    for pipelined in (by_password, by_user, wrong):
        await pipelined.aclose()


async def test_a_unix_socket_url(tmp_path: Path) -> None:
    socket_path = tmp_path / "r.sock"
    server = RedisProcess(tmp_path / "redis", extra_args=["--unixsocket", str(socket_path)])
    server.start()
    try:
        pipelined = PipelinedRedis(f"unix://{socket_path}")
        assert await pipelined.execute_command("EVAL", ECHO, 0, "via socket") == b"via socket"
        await pipelined.aclose()
    finally:
        server.stop()


def test_tls_urls_are_left_to_redis_py() -> None:
    assert PipelinedRedis.supports("redis://h:1/0") and PipelinedRedis.supports("unix:///tmp/r.sock")
    assert not PipelinedRedis.supports("rediss://h:1/0")
    with pytest.raises(ValueError, match="TLS"):
        PipelinedRedis("rediss://h:1/0")
