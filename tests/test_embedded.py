"""The embedded Redis: persistence, the data-dir lock, and dying with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from lmstfy_py.store.embedded import BINARY_ENV, EmbeddedRedis, EmbeddedRedisError, find_redis_server


def _alive(pid: int) -> bool:
    # An orphan reaped late stays a zombie (state Z) for a while: it has exited all the same.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_data_survives_a_restart(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path / "data")
    url = await embedded.start()
    assert url.startswith("unix://")
    conn = aioredis.Redis.from_url(url)
    await conn.set("job", b"payload")
    await conn.aclose()
    await embedded.stop()
    assert not embedded.running

    url = await embedded.start()
    conn = aioredis.Redis.from_url(url)
    try:
        assert await conn.get("job") == b"payload"
    finally:
        await conn.aclose()
        await embedded.stop()


def test_second_server_on_the_same_dir_fails_at_once(tmp_path: Path) -> None:
    first = EmbeddedRedis(tmp_path)
    first.start_sync()
    try:
        second = EmbeddedRedis(tmp_path)
        with pytest.raises(EmbeddedRedisError, match=f"data dir {tmp_path} is in use"):
            second.start_sync()
        assert not second.running
    finally:
        first.stop_sync()
    # Stopping releases the lock.
    second.start_sync()
    second.stop_sync()


def test_long_data_dir_falls_back_to_loopback_tcp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    embedded = EmbeddedRedis(deep)
    url = embedded.start_sync()
    try:
        assert url.startswith("redis://127.0.0.1:")
        with redis.Redis.from_url(url) as conn:
            assert conn.ping()
    finally:
        embedded.stop_sync()


def test_failed_start_names_the_log_and_releases_the_lock(tmp_path: Path) -> None:
    broken = EmbeddedRedis(tmp_path, binary="/bin/false")
    with pytest.raises(EmbeddedRedisError, match=f"exited with code 1 at start-up; see {tmp_path}/redis.log"):
        broken.start_sync()
    working = EmbeddedRedis(tmp_path)
    working.start_sync()
    working.stop_sync()


def test_binary_can_be_chosen_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BINARY_ENV, "/opt/redis-6.2/bin/redis-server")
    assert find_redis_server() == "/opt/redis-6.2/bin/redis-server"
    monkeypatch.delenv(BINARY_ENV)
    assert os.access(find_redis_server(), os.X_OK)


PARENT = textwrap.dedent(
    """
    import sys, time
    import redis
    from lmstfy_py.store.embedded import EmbeddedRedis

    embedded = EmbeddedRedis(sys.argv[1])
    url = embedded.start_sync()
    redis.Redis.from_url(url).set("written-before-crash", 1)
    print(embedded.pid, flush=True)
    time.sleep(60)
    """
)


def test_redis_dies_with_its_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        redis_pid = int(parent.stdout.readline())
        assert _alive(redis_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_gone(redis_pid, timeout=5), "the embedded Redis outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()

    # Its SIGTERM was a clean shutdown: the lock is free and the AOF kept the write.
    embedded = EmbeddedRedis(tmp_path)
    url = embedded.start_sync()
    try:
        with redis.Redis.from_url(url) as conn:
            assert conn.get("written-before-crash") == b"1"
    finally:
        embedded.stop_sync()
