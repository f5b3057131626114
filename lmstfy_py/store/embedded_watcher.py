"""Keep the embedded Redis serving: restart it when it dies, stop the whole server when it cannot.

Without this, a killed embedded Redis left the server answering 503 for ever, alive enough
that no supervisor (systemd, Kubernetes) would restart it. The watcher is a thread of the
main process, which owns the Redis (with `--workers N` that is the worker supervisor). It polls
the child every POLL_S; when the child exits while no stop was asked for, it logs one ERROR
(with the exit code or the signal) and starts Redis again on the same data dir, lock and
socket: the append-only file brings the data back, and every process's clients reconnect to
the same address by themselves. Failed attempts back off (0.1 s doubling, capped); after
MAX_FAILED_RESTARTS in a row whose Redis never answered PING, the watcher records why in
`failure` and calls `give_up`, which stops the server (the CLI then exits 1 with that reason).

A Redis that is alive but answers nothing (stopped with SIGSTOP, its main thread stuck) would
leave every request answering 503 for ever just the same, so the watcher also sends it a PING
every PING_EVERY_S; one that has answered nothing at all (not even -LOADING or -BUSY) for
`hang_s` seconds is killed with SIGKILL, and restarted as a dead one is. With fsync always
nothing it acknowledged is lost by that; a Redis busy in a long Lua script still answers -BUSY.

The restarted Redis is forked by this thread, so it dies when the thread ends (PR_SET_PDEATHSIG,
see embedded.py): `stop()` stops the Redis first and the thread after. The thread blocks every
signal, so process-directed signals still reach the main thread, whose sigtimedwait (several
workers) or event loop (one worker) handles them.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Self

from lmstfy_py.store.embedded import EmbeddedRedis, EmbeddedRedisError, describe_exit

POLL_S = 0.1
PING_EVERY_S = 1.0
HANG_S = 30.0  # config [server] redis_hang_timeout
MAX_FAILED_RESTARTS = 5
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0
# A restart in progress when the stop comes ends within a PING attempt (0.5 s) of its Redis stopping.
JOIN_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)


class RedisLostError(RuntimeError):
    """The embedded Redis died and could not be restarted; the text says why, in one line."""


class RedisWatcher:
    """`start()` (or enter it) after the Redis started, `stop()` (or leave it) instead of stopping
    the Redis yourself."""

    def __init__(
        self,
        redis: EmbeddedRedis,
        give_up: Callable[[], None],
        *,
        max_failures: int = MAX_FAILED_RESTARTS,
        poll_s: float = POLL_S,
        hang_s: float = HANG_S,
    ) -> None:
        self.redis = redis
        self.max_failures = max_failures
        self.poll_s = poll_s
        self.hang_s = hang_s
        # Why the watcher gave up (the server must then exit non-zero); None while all is well.
        self.failure: str | None = None
        self._give_up = give_up
        # A stop was asked for: no restart from now on.
        self._stopping = threading.Event()
        # The Redis is stopped: the thread may end (before, its end would SIGTERM the Redis it forked).
        self._stopped = threading.Event()
        # Held while spawning and while deciding to stop: no Redis is started once a stop began.
        self._spawning = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="embedded-redis-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the Redis for good (a stop is never taken for a death), then the thread."""
        with self._spawning:
            self._stopping.set()
        try:
            self.redis.stop_sync()
        finally:
            self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_TIMEOUT_S)

    # A context manager, not an async one: the CLI runs it from the main thread before any event loop.
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            silent_since: float | None = None  # when a PING first went unanswered
            next_ping = time.monotonic() + PING_EVERY_S
            while not self._stopped.wait(self.poll_s):
                code = self.redis.exit_code()
                if code is not None:
                    if not self._revive(code):
                        return
                    silent_since = None
                elif time.monotonic() >= next_ping:
                    silent_since = self._check_answers(silent_since)
                    next_ping = time.monotonic() + PING_EVERY_S
        except Exception as exc:
            # Never die silently: the Redis this thread started would die with it, unwatched.
            log.exception("the watcher of the embedded Redis failed")
            self._fail(f"the watcher of the embedded Redis failed: {exc!r}")

    def _revive(self, code: int) -> bool:
        """Restart the Redis that exited with `code`; False when stopping or given up."""
        if self._stopping.is_set():
            return False
        death = f"the embedded Redis (pid {self.redis.pid}) {describe_exit(code)}"
        log.error("%s; restarting it on %s", death, self.redis.data_dir)
        began, backoff, attempt = time.monotonic(), FIRST_BACKOFF_S, 0
        while True:
            attempt += 1
            try:
                proc = self._respawn()
                if proc is None:
                    return False
                self.redis.wait_ready(proc)
            except (EmbeddedRedisError, OSError) as exc:
                if self._stopping.is_set():
                    return False
                if attempt >= self.max_failures:
                    self._fail(f"{death} and {attempt} restarts in a row failed, the last: {exc}")
                    return False
                log.warning("restart %d of the embedded Redis failed (next in %gs): %s", attempt, backoff, exc)
                if self._stopped.wait(backoff):
                    return False
                backoff = min(2 * backoff, MAX_BACKOFF_S)
                continue
            log.info(
                "the embedded Redis serves again (pid %d), %.2fs after the restart began",
                proc.pid,
                time.monotonic() - began,
            )
            return True

    def _check_answers(self, silent_since: float | None) -> float | None:
        """PINGs the Redis; kills it once it has answered nothing for hang_s. The new silent_since."""
        if self.redis.responds():
            return None
        now = time.monotonic()
        if silent_since is None:
            return now
        if now - silent_since < self.hang_s:
            return silent_since
        with self._spawning:
            if self._stopping.is_set():
                return None
            log.error(
                "the embedded Redis (pid %s) has answered nothing for %.0fs; killing it to restart it",
                self.redis.pid,
                now - silent_since,
            )
            self.redis.kill()
        return None

    def _respawn(self) -> subprocess.Popen[bytes] | None:
        with self._spawning:
            if self._stopping.is_set():
                return None
            return self.redis.respawn_sync()

    def _fail(self, reason: str) -> None:
        with self._spawning:
            if self._stopping.is_set():
                return  # the server is stopping anyway: nothing to report
            self.failure = reason
        self._give_up()
