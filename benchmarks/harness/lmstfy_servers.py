"""Real `lmstfy-py serve` processes, for the tests and the benchmarks alike.

`Server` is one `lmstfy-py serve` process on loopback ports: with its embedded Redis in a
data dir (the default), or on an external Redis (`redis_url`), or with the pools of a config
file (`config`); extra `serve` flags (workers, ...) at construction or per start. `start()` returns once the admin API
answers; `stop()` is a graceful stop (SIGTERM), `kill()` a crash (SIGKILL) that returns once
every process of the server (workers, embedded Redis) is gone, so the data dir can serve again;
`cleanup()` (or leaving its `with` block) kills whatever is left, whatever happened. Its stdout
and stderr go to files in its work dir, appended to across restarts.

Beside it the small helpers: free ports, a token through the admin API, a process's children
and the connections it holds. No pytest here: benchmarks/ starts its servers with this too,
and a failure is a `ServerError` carrying the server's stderr.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import httpx

from benchmarks.harness.ports import free_port

__all__ = [
    "NS",
    "QUEUE",
    "Server",
    "ServerError",
    "accepted_connections",
    "alive",
    "child_pids",
    "comm",
    "create_token",
    "free_port",
    "free_port_besides",
    "redis_pids",
    "serve_command",
    "started_together",
    "wait_until",
]

# A server is up in 2-5 s; the suite's serial part once met two starts (of three modules running at
# once, on an hour when the VM ran slowly) that took over 15 s with nothing wrong: how
# soon a server starts is measured elsewhere (README, "Which machine"), not by this deadline.
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
GONE_TIMEOUT = 10.0
POLL_S = 0.05
REDIS_NAMES = ("redis-server", "valkey-server")
# The namespace and queue of tests that need no namespace of their own.
NS, QUEUE = "e2e", "jobs"


PORT_ATTEMPTS = 3  # a first start on ports taken meanwhile is tried again on new ones


def free_port_besides(taken: int) -> int:
    """A free port other than `taken`: the kernel may hand out a port just released again, and a
    server given the same port twice refuses to start (a fresh-clone CI run failed so)."""
    while (port := free_port()) == taken:
        pass
    return port


class ServerError(RuntimeError):
    """A server that exited, never answered, or did not stop; the message ends with its stderr."""


class Server:
    """One `lmstfy-py serve` process; `start()` returns once its admin API answers.

    Ports are free ones unless given: a server made again with the same data dir and ports is
    the same server restarted. `redis_url` replaces the embedded Redis (and the data dir);
    `config` is passed as `--config` (or `config_flag`: lmstfy's `-c`); its pools may or may not
    include an embedded one. With `own_flags=False` the command line is only the config file and
    `args`, as an operator would write it: the file must name the ports given here.
    `http_server` is passed as `--http-server` when given (tests get it from the `http_server`
    fixture, tests/conftest.py).
    """

    def __init__(
        self,
        workdir: Path,
        data_dir: Path | None = None,
        port: int = 0,
        admin_port: int = 0,
        *,
        redis_url: str | None = None,
        config: Path | None = None,
        config_flag: str = "--config",
        args: Sequence[str] = (),
        own_flags: bool = True,
        http_server: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.data_dir = data_dir or workdir / "data"
        self.redis_url = redis_url
        self.config = config
        self.config_flag = config_flag
        # False: the command line is the config file and `args` alone (the ports must be in the file).
        self.own_flags = own_flags
        self.port = port or free_port()
        self.admin_port = admin_port or free_port_besides(self.port)
        self._ports_chosen_here = not port and not admin_port
        self.args = [*args, "--http-server", http_server] if http_server else list(args)
        name = f"server-{self.port}-{time.monotonic_ns()}"
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        self.proc: subprocess.Popen[bytes] | None = None
        self.redis_pid = 0  # the embedded Redis of the current run; 0 with redis_url
        self.starts = 0  # how many times it became ready
        self._children: dict[int, str] = {}  # pid -> comm, seen once ready: what kill() waits for

    @property
    def data_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def redis_socket(self) -> Path:
        """The embedded Redis's unix socket."""
        return self.data_dir / "redis.sock"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, *more: str) -> list[str]:
        config = [self.config_flag, str(self.config)] if self.config else []
        if not self.own_flags:
            return [*serve_command(), *config, *self.args, *more]
        ports = ["--host", "127.0.0.1", "--port", str(self.port), "--admin-port", str(self.admin_port)]
        redis = ["--redis-url", self.redis_url] if self.redis_url else ["--data-dir", str(self.data_dir)]
        return [*serve_command(), *ports, *redis, *config, *self.args, *more]

    # -- start ---------------------------------------------------------------------------

    def start(self, *more: str) -> Server:
        """Launches it (with `more` flags besides its own) and waits until it answers. Ports this
        harness chose were free a moment before; another process may bind one meanwhile (the
        parallel tests start servers and Redis all the time): a first start refused so is tried
        again on new ones. A restart keeps its ports: whoever restarts it relies on them."""
        for attempt in range(PORT_ATTEMPTS):
            self.launch(*more)
            try:
                self.wait_ready()
                return self
            except ServerError as refused:
                if not self.port_taken(refused) or attempt == PORT_ATTEMPTS - 1:
                    raise
                self.new_ports()
        raise AssertionError("unreachable")

    def port_taken(self, refused: ServerError) -> bool:
        """Whether a first start was refused for a port this harness chose (which another process,
        or another server of the same test, was given too)."""
        return "Address already in use" in str(refused) and self._ports_chosen_here and self.starts == 0

    def new_ports(self) -> None:
        self.port = free_port()
        self.admin_port = free_port_besides(self.port)

    def launch(self, *more: str) -> None:
        """Starts the process without waiting (several servers start faster together)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.redis_pid, self._children = 0, {}
        with open(self.stdout_path, "ab") as stdout, open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                self.command(*more),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                preexec_fn=_as_from_a_terminal,
            )

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        proc = self._proc()
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1) as client:
            while not self._answers(client):
                if proc.poll() is not None:
                    raise ServerError(f"server exited with {proc.returncode}: {self.stderr()}")
                if time.monotonic() > deadline:
                    raise ServerError(f"server not ready within {timeout:g}s: {self.stderr()}")
                time.sleep(POLL_S)
        self._children = {pid: comm(pid) for pid in child_pids(proc.pid)}
        found = redis_pids(proc.pid)
        if not self.redis_url and not self.config and len(found) != 1:
            raise ServerError(f"expected one embedded Redis, found {found}: {self.stderr()}")
        self.redis_pid = found[0] if found else 0
        self.starts += 1

    def _answers(self, client: httpx.Client) -> bool:
        try:
            return client.get(f"{self.admin_url}/version").status_code == 200
        except httpx.TransportError:
            return False

    # -- what it says and runs -------------------------------------------------------------

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def pids(self) -> list[int]:
        """The server's processes: itself and its workers, not its Redis."""
        proc = self._proc()
        return [proc.pid, *(pid for pid in child_pids(proc.pid) if pid != self.redis_pid)]

    # -- stop --------------------------------------------------------------------------------

    def signal(self, sig: signal.Signals) -> None:
        self._proc().send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self._proc().wait(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then its exit code; SIGKILL (and its negative code) if it is not gone within `timeout`."""
        proc = self._proc()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return proc.wait()

    def kill(self) -> None:
        """SIGKILL; returns once its workers and its Redis are gone too (their data dir lock with them)."""
        proc = self._proc()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        # The kernel stops them (PR_SET_PDEATHSIG); Redis flushes its AOF on the way out.
        if not wait_until(lambda: not any(alive(pid) for pid in self._children), GONE_TIMEOUT):
            raise ServerError(f"processes {sorted(self._children)} outlived their server: {self.stderr()}")

    def cleanup(self) -> None:
        """Whatever happened, nothing of it keeps running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        for pid, name in self._children.items():
            # Only if the pid is still the process it was: a pid may be reused once it exited.
            if alive(pid) and comm(pid) == name:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.cleanup()

    def _proc(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise ServerError("the server was never launched")
        return self.proc


S = TypeVar("S", bound=Server)


@contextlib.contextmanager
def started_together(servers: Sequence[S]) -> Iterator[Sequence[S]]:
    """Starts the servers at once (start-up is most of a multi-server test's time); cleans them all up."""
    try:
        for server in servers:
            server.launch()
        for server in servers:
            try:
                server.wait_ready()
            except ServerError as refused:
                # Their ports were chosen one server after another, each free when chosen: the
                # kernel may give a port just released to the next server, or to another process.
                if not server.port_taken(refused):
                    raise
                server.new_ports()
                server.start()
        yield servers
    finally:
        for server in servers:
            server.cleanup()


def _as_from_a_terminal() -> None:
    """A runner started in the background (a shell's `&`, and so pytest-xdist's workers and what they
    start) has SIGINT ignored, and `serve` keeps an ignored SIGINT ignored, as nohup wants: the
    server is started as an operator's terminal would start it, Ctrl-C stopping it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def serve_command() -> list[str]:
    return [sys.executable, "-m", "lmstfy_py.cli", "serve"]


def create_token(server: Server, ns: str = NS, description: str = "test") -> str:
    """A new token of namespace `ns`, through the server's admin API."""
    response = httpx.post(f"{server.admin_url}/token/{ns}", params={"description": description}, timeout=10)
    if response.status_code != 201:
        raise ServerError(f"POST /token/{ns}: {response.status_code} {response.text}")
    token: str = response.json()["token"]
    return token


# -- processes (/proc) -------------------------------------------------------------------------


def redis_pids(server_pid: int) -> list[int]:
    """The redis-server children of `server_pid` (Redis rewrites its cmdline; its comm stays)."""
    return [pid for pid in child_pids(server_pid) if comm(pid) in REDIS_NAMES]


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def child_pids(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry.name))
    return children


def alive(pid: int) -> bool:
    # An orphan reaped late stays a zombie (state Z) for a while: it has exited all the same.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def accepted_connections(pid: int, port: int) -> int:
    """How many connections to local `port` process `pid` has accepted and holds open."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01":  # ESTABLISHED
                inodes.add(f"socket:[{inode}]")
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            held += os.readlink(fd) in inodes
    return held


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True
