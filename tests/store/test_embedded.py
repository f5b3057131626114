"""The embedded Redis: persistence, the data-dir lock, dying with its parent, and its watcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from lmstfy_py.store.embedded import BINARY_ENV, EmbeddedRedis, EmbeddedRedisError, find_redis_server
from lmstfy_py.store.embedded_watcher import POLL_S, RedisWatcher


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


# -- the watcher: restart on death, give up after failed restarts, never restart on a stop ----


def _corrupt_aof(data_dir: Path) -> None:
    """What a disk error or a bad hand edit leaves behind: an AOF manifest Redis refuses at start-up."""
    (data_dir / "appendonlydir" / "appendonly.aof.manifest").write_text("garbage\n")


def _get_within(url: str, key: str, timeout: float) -> bytes | None:
    """GET `key` at `url`, retrying while that Redis does not answer yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with redis.Redis.from_url(url, socket_timeout=1) as conn:
                value: bytes | None = conn.get(key)
                return value
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@pytest.mark.parametrize("deep", [False, True], ids=["unix-socket", "loopback-tcp"])
def test_a_killed_redis_is_restarted_on_its_data_and_address(tmp_path: Path, deep: bool) -> None:
    data_dir = tmp_path / ("d" * 60) / ("e" * 60) if deep else tmp_path
    embedded = EmbeddedRedis(data_dir)
    url = embedded.start_sync()
    gave_up = threading.Event()
    watcher = RedisWatcher(embedded, gave_up.set)
    watcher.start()
    try:
        with redis.Redis.from_url(url) as conn:
            conn.set("acknowledged", 1)
        killed = embedded.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        # The same URL (for TCP: the same port) reaches the new process, with the data.
        assert _get_within(url, "acknowledged", timeout=5) == b"1"
        restarted = embedded.pid
        assert restarted not in (None, killed)
    finally:
        watcher.stop()
    assert restarted is not None and _wait_gone(restarted, timeout=5)
    assert not gave_up.is_set() and watcher.failure is None


def test_a_stop_is_not_taken_for_a_death(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedded = EmbeddedRedis(tmp_path)
    embedded.start_sync()
    pid = embedded.pid
    gave_up = threading.Event()
    watcher = RedisWatcher(embedded, gave_up.set)
    watcher.start()
    time.sleep(3 * POLL_S)  # the watcher is polling
    watcher.stop()
    assert pid is not None and _wait_gone(pid, timeout=5)
    time.sleep(3 * POLL_S)
    assert not embedded.running
    assert not gave_up.is_set() and watcher.failure is None
    assert [r.getMessage() for r in caplog.records if r.name.endswith("embedded_watcher")] == []
    # The lock went with it: the data dir is free for the next server.
    again = EmbeddedRedis(tmp_path)
    again.start_sync()
    again.stop_sync()


def test_a_restarted_redis_is_stopped_cleanly(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path)
    url = embedded.start_sync()
    watcher = RedisWatcher(embedded, threading.Event().set)
    watcher.start()
    try:
        killed = embedded.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        assert _get_within(url, "anything", timeout=5) is None
        with redis.Redis.from_url(url) as conn:
            conn.set("written-after-the-restart", 1)
    finally:
        watcher.stop()
    # Forked by the watcher thread, which blocks SIGTERM: it must still take our SIGTERM (and
    # flush its AOF), not wait for the SIGKILL of stop_process's timeout.
    assert "ready to exit, bye bye" in (tmp_path / "redis.log").read_text().splitlines()[-1]
    again = EmbeddedRedis(tmp_path)
    url = again.start_sync()
    try:
        with redis.Redis.from_url(url) as conn:
            assert conn.get("written-after-the-restart") == b"1"
    finally:
        again.stop_sync()


def test_the_watcher_gives_up_after_5_failed_restarts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedded = EmbeddedRedis(tmp_path)
    embedded.start_sync()
    gave_up = threading.Event()
    watcher = RedisWatcher(embedded, gave_up.set)
    watcher.start()
    try:
        _corrupt_aof(tmp_path)
        killed = embedded.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        # 5 attempts that fail at once, 0.1 + 0.2 + 0.4 + 0.8 s apart.
        assert gave_up.wait(timeout=15)
    finally:
        watcher.stop()
    assert watcher.failure == (
        f"the embedded Redis (pid {killed}) killed by SIGKILL and 5 restarts in a row failed, the last: "
        f"redis-server exited with code 1 at start-up; see {tmp_path}/redis.log: "
        f"{(tmp_path / 'redis.log').read_text().strip().splitlines()[-1]}"
    )
    assert "Invalid AOF manifest file format" in watcher.failure
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.endswith("embedded_watcher")]
    assert logged[0] == ("ERROR", f"the embedded Redis (pid {killed}) killed by SIGKILL; restarting it on {tmp_path}")
    assert [level for level, _ in logged[1:]] == ["WARNING"] * 4
    assert (tmp_path / "redis.log").read_text().count("Invalid AOF manifest file format") == 5
