"""Session-wide real Redis servers, and per-test URLs to them that start empty; real `lmstfy-py serve`
processes (benchmarks/harness/lmstfy_servers.py) made per test, under the HTTP server of `http_server`.

The Redis servers start once per session (about 20 ms each) and are stopped at the end even
when tests fail; if the session itself is killed they die with it (PR_SET_PDEATHSIG, see
lmstfy_py/store/embedded.py). A test that stops or kills one (fault tests) leaves it to the
next test's `redis_url`/`cluster_url`, which starts it again on the same port.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, free_port_besides, started_together
from benchmarks.harness.redis_groups import DATA_PASSWORD, SENTINEL_PASSWORD, Cluster, ReplicatedCluster, SentinelGroup
from benchmarks.harness.redis_groups import MASTER_NAME as SENTINEL_MASTER
from benchmarks.harness.redis_servers import ClusterNode, RedisProcess, free_port
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app, create_data_app

__all__ = ["EVERY_HTTP_SERVER", "eventually", "free_port"]

# httpx builds an SSL context for every client, and from a CA file (SSL_CERT_FILE, else certifi's) it
# parses the whole bundle each time: ~40 ms of CPU per httpx.get(), thousands of times a session. From a
# CA directory it looks certificates up when a handshake needs one (~2 ms a client), so the session and
# the servers and programs it starts (they inherit this) read the system's directory where there is one.
if Path("/etc/ssl/certs").is_dir():
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ["SSL_CERT_DIR"] = "/etc/ssl/certs"

# What `lmstfy-py serve --http-server` takes. A test module naming them in its HTTP_SERVERS runs each of
# its tests that start a server (through `http_server`) under each; the others run under the default.
EVERY_HTTP_SERVER = ("hypercorn", "uvicorn")
DEFAULT_HTTP_SERVER = "hypercorn"
_NEEDS = {"uvicorn": ("uvicorn", "httptools")}


# Modules whose tests assert deadlines or timings (or drive a browser): `dev.py test` runs them apart,
# after the rest, two modules at a time (each module's tests one after another), so that they never
# share the machine with the busy rest.
# The programs' tests (test_programs.py, test_bench.py) are heavy but assert no timing: they run
# with the rest, which keeps the serial part, and so CI, shorter.
SERIAL_MODULES = {
    "test_crash.py",
    "test_dashboard_browser.py",
    "test_embedded_supervision.py",
    "test_http_hardening.py",
    "test_lmstfy_e2e.py",
    "test_long_polls.py",
    "test_many_instances.py",
    "test_push_e2e.py",
    "test_redis_freeze.py",
    "test_schedules_e2e.py",
    "test_throttle_e2e.py",
    "test_timers.py",
    "test_accesslog.py",
    "test_command.py",
    "test_worker.py",
    "test_cluster_failover.py",
    "test_events_e2e.py",
}
# A module renamed or moved out of sight would silently run in parallel with the rest: every name must still exist.
_MISSING = SERIAL_MODULES - {path.name for path in Path(__file__).resolve().parent.rglob("test_*.py")}
assert not _MISSING, f"tests/conftest.py SERIAL_MODULES names no test module: {sorted(_MISSING)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--http-server",
        choices=EVERY_HTTP_SERVER,
        help="every real server of the session under this one (default: a module's HTTP_SERVERS, else hypercorn)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs the tests of a module with HTTP_SERVERS under each of those servers, unless --http-server chose one."""
    servers = getattr(metafunc.module, "HTTP_SERVERS", ())
    if "http_server" not in metafunc.fixturenames or metafunc.config.getoption("--http-server") or not servers:
        return
    params = [pytest.param(name, marks=_installed(name)) for name in servers]
    metafunc.parametrize("http_server", params, scope="module")


def _installed(name: str) -> pytest.MarkDecorator:
    missing = [module for module in _NEEDS.get(name, ()) if importlib.util.find_spec(module) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{name} needs {missing}: pip install -e '.[fast]'")


class _Startable(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


_Server = TypeVar("_Server", bound=_Startable)


def _running(server: _Server) -> Iterator[_Server]:
    """A fixture's test Redis (or group of them), started, and stopped after its last test."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def http_server(pytestconfig: pytest.Config) -> str:
    """The HTTP server real servers run under: --http-server, else hypercorn (modules with HTTP_SERVERS
    get each of theirs instead, see pytest_generate_tests)."""
    chosen: str | None = pytestconfig.getoption("--http-server")
    return chosen or DEFAULT_HTTP_SERVER


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    yield from _running(RedisProcess(tmp_path_factory.mktemp("redis")))


@pytest.fixture(scope="session")
def cluster_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterNode]:
    yield from _running(ClusterNode(tmp_path_factory.mktemp("cluster")))


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    """URL of the standalone test Redis, running and flushed."""
    redis_server.start()
    redis_server.flushall()
    return redis_server.url


@pytest.fixture
def cluster_url(cluster_server: ClusterNode) -> str:
    """URL of the one-node test cluster (for RedisCluster.from_url), running and flushed."""
    cluster_server.start()
    cluster_server.flushall()
    return cluster_server.url


@pytest.fixture(scope="session")
def cluster3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _running(Cluster(tmp_path_factory.mktemp("cluster3")))


@pytest.fixture
def cluster3_nodes(cluster3_server: Cluster) -> tuple[str, ...]:
    """The address of each node of the 3-master test cluster, running and flushed."""
    cluster3_server.start()
    cluster3_server.flushall()
    return cluster3_server.addresses


@pytest.fixture
def replicated_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicatedCluster]:
    """A fresh 3-master test cluster with a replica per master and quick failovers, for a test that
    kills its masters (made per test: about 2 s)."""
    yield from _running(ReplicatedCluster(tmp_path_factory.mktemp("replicated")))


@pytest.fixture(scope="session")
def sentinel_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    yield from _running(SentinelGroup(tmp_path_factory.mktemp("sentinel")))


@pytest.fixture
def sentinel_config(sentinel_group: SentinelGroup) -> PoolConfig:
    """Pool "default" on the Sentinel-managed test master (passwords on both sides), flushed."""
    sentinel_group.flushall()
    return PoolConfig(
        "default",
        kind="sentinel",
        master_name=SENTINEL_MASTER,
        sentinels=(sentinel_group.sentinel_address,),
        password=DATA_PASSWORD,
        sentinel_password=SENTINEL_PASSWORD,
    )


@pytest.fixture(params=["standalone", "cluster", "cluster3"])
def pool_config(request: pytest.FixtureRequest) -> PoolConfig:
    """Pool "default" on the standalone test Redis, then on the one-node test cluster, then on the 3-master one:
    tests using it run on all three, so a script that touched two hash slots fails (CROSSSLOT) on the
    cluster runs, and on the 3-master run the pump's pool-wide keys ("due", "nss") live on another node
    than most namespaces' keys. (tests/web narrows it: its conftest.py.)"""
    return pool_config_of(request, request.param)


def pool_config_of(request: pytest.FixtureRequest, kind: str) -> PoolConfig:
    if kind == "standalone":
        return PoolConfig("default", url=request.getfixturevalue("redis_url"))
    if kind == "cluster3":
        return PoolConfig("default", kind="cluster", cluster_nodes=request.getfixturevalue("cluster3_nodes"))
    address = urlsplit(request.getfixturevalue("cluster_url")).netloc
    return PoolConfig("default", kind="cluster", cluster_nodes=(address,))


@pytest.fixture
def make_lmstfy_server(tmp_path: Path, http_server: str) -> Iterator[Callable[[], Server]]:
    """Builds `lmstfy-py serve` processes (not started) on one data dir and one pair of ports, so that a
    second one is the first restarted; cleans them all up."""
    made: list[Server] = []
    data_dir, port = tmp_path / "data", free_port()
    admin_port = free_port_besides(port)

    def make() -> Server:
        server = Server(tmp_path, data_dir, port, admin_port, http_server=http_server)
        made.append(server)
        return server

    yield make
    for server in made:
        server.cleanup()


async def eventually(check: Callable[[], object], timeout: float = 5.0) -> None:
    """Waits, the event loop running meanwhile, until `check()` is true; fails past `timeout` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.01)


def client_for(app: object) -> httpx.AsyncClient:
    """An HTTP client that drives an ASGI app in-process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")  # type: ignore[arg-type]


@pytest.fixture
async def runtime(pool_config: PoolConfig) -> AsyncIterator[Runtime]:
    started = await Runtime.start(Config(pools={"default": pool_config}))
    try:
        yield started
    finally:
        await started.stop()


@pytest.fixture
async def standalone_runtime(redis_url: str) -> AsyncIterator[Runtime]:
    """A Runtime with its background loops on the standalone test Redis only (no cluster runs)."""
    started = await Runtime.start(Config(pools={"default": PoolConfig("default", url=redis_url)}))
    try:
        yield started
    finally:
        await started.stop()


@pytest.fixture
async def standalone_web_runtime(redis_url: str) -> AsyncIterator[Runtime]:
    """A Runtime on the standalone test Redis without pumps and schedulers: for tests of the web
    layer alone, whose answers do not depend on the backend."""
    started = await Runtime.start(Config(pools={"default": PoolConfig("default", url=redis_url)}), run_pumps=False)
    try:
        yield started
    finally:
        await started.stop()


@pytest.fixture
def two_lmstfy_servers(tmp_path: Path, redis_url: str, http_server: str) -> Iterator[tuple[Server, Server]]:
    """Two `lmstfy-py serve` processes on the standalone test Redis, started together."""
    servers = (
        Server(tmp_path / "a", redis_url=redis_url, http_server=http_server),
        Server(tmp_path / "b", redis_url=redis_url, http_server=http_server),
    )
    with started_together(servers) as running:
        yield running[0], running[1]


@pytest.fixture
async def data(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_data_app(runtime)) as client:
        yield client


@pytest.fixture
async def admin(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_admin_app(runtime)) as client:
        yield client
