"""`lmstfy-py serve` as a real process: start-up, HTTP, graceful stop, crash, persistence.

Each server runs its embedded Redis in a tmp data dir on free ports; the fixture kills
whatever is left when a test ends, whatever happened to it.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.redis_procs import free_port

READY_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
NS, QUEUE = "e2e", "jobs"


class Server:
    """One `lmstfy-py serve` subprocess; `start()` returns once the admin API answers."""

    def __init__(self, tmp_path: Path, data_dir: Path, port: int, admin_port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.admin_port = admin_port
        self.stderr_path = tmp_path / f"server-{port}-{time.monotonic_ns()}.err"
        self.proc: subprocess.Popen[bytes] | None = None
        self.redis_pid = 0

    @property
    def data_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self, *args: str) -> Server:
        ports = ["--host", "127.0.0.1", "--port", str(self.port), "--admin-port", str(self.admin_port)]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [*serve_command(), *ports, "--data-dir", str(self.data_dir), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self._wait_ready()
        assert self.proc is not None
        (self.redis_pid,) = redis_pids(self.proc.pid)
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode}: {self.stderr()}")
            try:
                if httpx.get(f"{self.admin_url}/version", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail(f"server not ready within {READY_TIMEOUT:g}s: {self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        # A server killed above leaves its Redis to die by PR_SET_PDEATHSIG: don't let it outlive the test.
        if self.redis_pid and alive(self.redis_pid) and comm(self.redis_pid).endswith("-server"):
            os.kill(self.redis_pid, signal.SIGKILL)


def serve_command() -> list[str]:
    return [sys.executable, "-m", "lmstfy_py.cli", "serve"]


def redis_pids(server_pid: int) -> list[int]:
    """The redis-server children of `server_pid` (Redis rewrites its cmdline; its comm stays)."""
    return [pid for pid in child_pids(server_pid) if comm(pid) in ("redis-server", "valkey-server")]


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


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[[], Server]]:
    """Builds servers on a shared data dir and ports (so a restart reuses them); cleans them all up."""
    made: list[Server] = []
    data_dir, port, admin_port = tmp_path / "data", free_port(), free_port()

    def make() -> Server:
        server = Server(tmp_path, data_dir, port, admin_port)
        made.append(server)
        return server

    yield make
    for server in made:
        server.cleanup()


def create_token(server: Server) -> str:
    response = httpx.post(f"{server.admin_url}/token/{NS}", params={"description": "e2e"})
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def publish(client: httpx.Client, token: str, body: bytes) -> str:
    response = client.put(f"/api/{NS}/{QUEUE}", params={"token": token}, content=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def consume(client: httpx.Client, token: str) -> dict[str, object]:
    response = client.get(f"/api/{NS}/{QUEUE}", params={"token": token})
    assert response.status_code == 200, response.text
    job: dict[str, object] = response.json()
    return job


def size(client: httpx.Client) -> int:
    response = client.get(f"/api/{NS}/{QUEUE}/size")
    assert response.status_code == 200, response.text
    value: int = response.json()["size"]
    return value


def stop_gracefully(server: Server) -> None:
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.wait(STOP_TIMEOUT) == 0, server.stderr()
    assert time.monotonic() - started < STOP_TIMEOUT
    assert not alive(server.redis_pid)


def test_jobs_and_tokens_survive_a_graceful_restart(make_server: Callable[[], Server]) -> None:
    server = make_server().start()
    assert f"data {server.data_url}" in server.stderr()
    assert "redis embedded in" in server.stderr()
    token = create_token(server)
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        first, *_ = [publish(client, token, f"job-{i}".encode()) for i in range(3)]
        job = consume(client, token)
        assert (job["job_id"], base64.b64decode(str(job["data"]))) == (first, b"job-0")
        assert client.delete(f"/api/{NS}/{QUEUE}/job/{first}", params={"token": token}).status_code == 204
        assert size(client) == 2
        # An idle keep-alive connection must not hold the stop up.
        stop_gracefully(server)

    again = make_server().start()
    with httpx.Client(base_url=again.data_url, timeout=5) as client:
        assert size(client) == 2
        assert base64.b64decode(str(consume(client, token)["data"])) == b"job-1"
    stop_gracefully(again)


def test_several_workers_serve_and_stop_together(make_server: Callable[[], Server]) -> None:
    server = make_server().start("--workers", "2")
    assert server.proc is not None
    children = child_pids(server.proc.pid)
    assert len(children) == 3  # two workers and the embedded Redis
    token = create_token(server)
    request_ids = set()
    for i in range(16):  # a fresh connection each time, whichever worker accepts it
        with httpx.Client(base_url=server.data_url, timeout=5) as client:
            response = client.put(f"/api/{NS}/{QUEUE}", content=f"job-{i}".encode(), headers={"X-Token": token})
            assert response.status_code == 201, response.text
            request_ids.add(response.headers["x-request-id"])
    # Each worker draws its own request ids: none repeats another worker's.
    assert len(request_ids) == 16
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        assert size(client) == 16
    stop_gracefully(server)
    assert not any(alive(pid) for pid in children)


def accepted_by(pid: int, port: int) -> int:
    """How many connections to local `port` process `pid` has accepted and holds open."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01":  # ESTABLISHED
                inodes.add(f"socket:[{inode}]")
    fds = Path(f"/proc/{pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.readlink(fd) in inodes)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="one socket per worker is Linux-only")
def test_connections_opened_at_once_are_shared_by_the_workers(make_server: Callable[[], Server]) -> None:
    server = make_server().start("--workers", "2")
    assert server.proc is not None
    workers = [pid for pid in child_pids(server.proc.pid) if pid != server.redis_pid]
    # Opened together, as a pool of clients does: a shared listening socket let one worker take them all.
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(32)]
    try:
        assert wait_until(lambda: sum(accepted_by(pid, server.port) for pid in workers) == 32, 5)
        # Spread by a hash of the client's port: fewer than 4 of 32 on one worker has odds of 1e-6.
        assert min(accepted_by(pid, server.port) for pid in workers) >= 4
    finally:
        for client in clients:
            client.close()
    stop_gracefully(server)


def test_a_second_server_on_a_busy_port_exits_2_naming_it(make_server: Callable[[], Server], tmp_path: Path) -> None:
    server = make_server().start("--workers", "2")
    flags = [
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--admin-port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "other"),
    ]
    done = subprocess.run(
        [*serve_command(), *flags, "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{server.port} for the data API" in done.stderr
    stop_gracefully(server)


@pytest.mark.parametrize(
    ("config_text", "flags", "named"),
    [
        ('[server]\nport = "seven"\n', [], "[server] port: expected an integer"),
        ("[server]\nport = 7000\n", ["--admin-port", "7000"], "--admin-port: must differ from port"),
        ("[sever]\n", [], "unknown section [sever]"),
    ],
)
def test_a_bad_config_exits_2_with_one_line(tmp_path: Path, config_text: str, flags: list[str], named: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(config_text)
    done = subprocess.run(
        [*serve_command(), "--config", str(config), "--data-dir", str(tmp_path / "data"), *flags],
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("lmstfy-py: error: ")
    assert named in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_killed_server_leaves_no_redis_behind(make_server: Callable[[], Server]) -> None:
    server = make_server().start()
    token = create_token(server)
    with httpx.Client(base_url=server.data_url, timeout=5) as client:
        publish(client, token, b"survivor")
    server.signal(signal.SIGKILL)
    server.wait(STOP_TIMEOUT)
    assert wait_until(lambda: not alive(server.redis_pid), 5)

    again = make_server().start()  # the data dir lock is free again
    with httpx.Client(base_url=again.data_url, timeout=5) as client:
        # Redis got SIGTERM from the kernel, not SIGKILL: it flushed its AOF on the way out.
        assert base64.b64decode(str(consume(client, token)["data"])) == b"survivor"
    stop_gracefully(again)
