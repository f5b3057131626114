"""An lmstfy operator's switch (SPEC section 12): lmstfy's config file, flags, logs and metrics,
with real `lmstfy-py serve` processes on the session's test Redis.

The config files are lmstfy 1.0.10's (the shape of its config/demo-conf.toml: PascalCase keys,
[Accounts], [AdminRedis], [Pool.default]), started as an lmstfy service starts:
`lmstfy-py serve -c lmstfy.toml [-p pid] [-bt level] [-sv]`, nothing else on the command line.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, free_port, free_port_besides, serve_command, wait_until
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py import __version__

USER, PASSWORD = "test_user", "change.me"
AUTH = (USER, PASSWORD)
OUTPUT_TIMEOUT = 10.0
STOP_TIMEOUT = 15.0


def lmstfy_conf(redis_port: int, port: int, admin_port: int, extra: str = "", pool_extra: str = "") -> str:
    """An lmstfy 1.0.10 config file as its demo-conf.toml lays one out."""
    return f"""Host = "127.0.0.1"
Port = {port}
AdminHost = "127.0.0.1" # optional, default to localhost
AdminPort = {admin_port}
LogLevel = "info"
EnableAccessLog = true
{extra}
# default params
TTLSecond = 3600
TriesNum = 2

# basic auth accounts for the admin api
[Accounts]
{USER} = "{PASSWORD}"

[AdminRedis]  # redis used to store admin data, eg. tokens
Addr = "127.0.0.1:{redis_port}"

[Pool]
[Pool.default]
Addr = "127.0.0.1:{redis_port}"
{pool_extra}
"""


@pytest.fixture
def redis_port(redis_url: str, redis_server: RedisProcess) -> int:
    return redis_server.port


def lmstfy_server(tmp_path: Path, redis_port: int, *args: str, extra: str = "", pool_extra: str = "") -> Server:
    port = free_port()
    admin_port = free_port_besides(port)
    config = tmp_path / "lmstfy.toml"
    config.write_text(lmstfy_conf(redis_port, port, admin_port, extra, pool_extra))
    return Server(
        tmp_path, port=port, admin_port=admin_port, config=config, config_flag="-c", own_flags=False, args=args
    )


def new_token(server: Server, ns: str) -> str:
    response = httpx.post(f"{server.admin_url}/token/{ns}", params={"description": "compat"}, auth=AUTH)
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def wait_for(read: object, text: str) -> str:
    assert callable(read)
    assert wait_until(lambda: text in read(), OUTPUT_TIMEOUT), f"{text!r} never appeared in {read()!r}"
    output: str = read()
    return output


# -- the config file and the flags ---------------------------------------------------------


def test_lmstfy_config_file_starts_a_server_with_its_settings(tmp_path: Path, redis_port: int) -> None:
    pid_file = tmp_path / "lmstfy.pid"
    unknown = 'SecondaryStorage = "spanner"'  # a later lmstfy's key: lmstfy 1.0.10 ignores it, so do we (warned)
    with lmstfy_server(tmp_path, redis_port, "-p", str(pid_file), extra=unknown, pool_extra="PoolSize = 10") as server:
        server.start()
        # -p: the server's pid while it runs.
        assert pid_file.read_text() == str(server.pids()[0])
        # [Accounts] guard the admin API, as lmstfy's basic auth.
        assert httpx.post(f"{server.admin_url}/token/compat", params={"description": "x"}).status_code == 401
        token = new_token(server, "compat")
        # TTLSecond and TriesNum are the defaults of a publish.
        headers = {"X-Token": token}
        published = httpx.put(f"{server.data_url}/api/compat/q", content=b"hello", headers=headers)
        assert published.status_code == 201, published.text
        job = httpx.get(f"{server.data_url}/api/compat/q", params={"ttr": 30}, headers=headers).json()
        assert (job["data"], job["remain_tries"]) == ("aGVsbG8=", 1)
        assert 3590 <= job["ttl"] <= 3600
        # lmstfy's /metrics needs no account.
        assert httpx.get(f"{server.admin_url}/metrics").status_code == 200
        assert httpx.get(f"{server.admin_url}/pools").json() == ["default"]
        assert server.stop(STOP_TIMEOUT) == 0
        stderr = server.stderr()
    assert not pid_file.exists()  # removed at exit, as lmstfy's
    # Each key that means nothing here is warned about once, however many workers, never fatally.
    assert stderr.count("[Pool.default] PoolSize: no meaning here") == 1, stderr
    assert stderr.count("SecondaryStorage: not a key of lmstfy 1.0.10, ignored") == 1, stderr


def test_go_flag_spellings_and_a_bad_lmstfy_value(tmp_path: Path, redis_port: int) -> None:
    pid_file = tmp_path / "other.pid"
    with lmstfy_server(tmp_path, redis_port, f"--p={pid_file}", "-bt=info") as server:
        server.config_flag = "--c"
        server.start()
        assert pid_file.exists()
    bad = tmp_path / "bad.toml"
    bad.write_text(
        lmstfy_conf(redis_port, port := free_port(), free_port_besides(port)).replace(
            'LogLevel = "info"', 'LogLevel = "loud"'
        )
    )
    result = subprocess.run([*serve_command(), "-c", str(bad)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"lmstfy-py: error: {bad}: LogLevel: expected ")


def test_dash_v_prints_the_version_as_lmstfy_does() -> None:
    for command in ([*serve_command(), "-v"], [sys.executable, "-m", "lmstfy_py.cli", "-v"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"version: {__version__}\nbuilt at: unknown\ncommit: unknown\n"


def test_dash_sv_skips_token_checks_and_says_so(tmp_path: Path, redis_port: int) -> None:
    with lmstfy_server(tmp_path, redis_port, "-sv") as server:
        server.start()
        published = httpx.put(f"{server.data_url}/api/dev/q", content=b"x")
        assert published.status_code == 201, published.text
        consumed = httpx.get(f"{server.data_url}/api/dev/q", params={"token": "anything"})
        assert consumed.json()["job_id"] == published.json()["job_id"]
        ready = httpx.get(f"{server.admin_url}/ready").json()
        assert "token checks are OFF" in ready["warning"]
        stderr = server.stderr()
    assert "token checks are OFF (-sv)" in stderr


def test_without_dash_sv_a_token_is_needed(tmp_path: Path, redis_port: int) -> None:
    with lmstfy_server(tmp_path, redis_port) as server:
        server.start()
        assert httpx.put(f"{server.data_url}/api/dev/q", content=b"x").json() == {"error": "token not found"}
        assert "warning" not in httpx.get(f"{server.admin_url}/ready").json()


# -- logs ----------------------------------------------------------------------------------

TEXT_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def text_fields(line: str) -> dict[str, str]:
    return {key: json.loads(value) if value.startswith('"') else value for key, value in TEXT_FIELD.findall(line)}


def test_access_lines_without_log_dir_are_logrus_text_on_stdout(tmp_path: Path, redis_port: int) -> None:
    with lmstfy_server(tmp_path, redis_port) as server:
        server.start()
        token = new_token(server, "logs")
        query = {"token": token, "delay": "0"}
        httpx.put(f"{server.data_url}/api/logs/q1", content=b"x", params=query, headers={"X-Request-ID": "rid-7"})
        output = wait_for(server.stdout, "rid-7")
    line = next(line for line in output.splitlines() if "rid-7" in line)
    fields = text_fields(line)
    assert line.startswith('time="') and fields["level"] == "info"
    assert {key: fields[key] for key in ("pool", "path", "method", "code", "req_id", "namespace", "queue")} == {
        "pool": "default",
        "path": "/api/logs/q1",
        "method": "PUT",
        "code": "201",
        "req_id": "rid-7",
        "namespace": "logs",
        "queue": "q1",
    }
    assert fields["query"] == "token=***&delay=0" and token not in output  # the token never in a log
    assert re.fullmatch(r"[0-9.]+(ns|µs|ms|s)", fields["latency"]) and fields["ip"] == "127.0.0.1"


def test_log_dir_json_lines_from_every_worker_never_interleave(tmp_path: Path, redis_port: int) -> None:
    logs = tmp_path / "logs"
    extra = f'LogDir = "{logs}"\nLogFormat = "json"'
    requests = 400
    with lmstfy_server(tmp_path, redis_port, "--workers", "2", "-bt", "info", extra=extra) as server:
        server.start()
        token = new_token(server, "many")
        # Long lines (1 KiB of query) from both workers at once: a torn write would show as a bad line.
        padding = "p" * 1024

        # One client for all threads: its 16 connections are spread over both workers by the kernel (a
        # client per request would spend most of the test building SSL contexts).
        with httpx.Client(limits=httpx.Limits(max_connections=16)) as client:

            def publish(i: int) -> int:
                url = f"{server.data_url}/api/many/q{i % 4}"
                params = {"pad": padding, "token": token}
                return client.put(url, content=b"x", params=params, headers={"X-Request-ID": f"r-{i}"}).status_code

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                assert set(pool.map(publish, range(requests))) == {201}
        assert wait_until(lambda: (logs / "access.log").read_text().count('"req_id":"r-') == requests, OUTPUT_TIMEOUT)
        assert server.stop(STOP_TIMEOUT) == 0
    access = [json.loads(line) for line in (logs / "access.log").read_text().splitlines()]
    published = [entry for entry in access if entry["req_id"].startswith("r-")]
    assert len(published) == requests
    assert {entry["level"] for entry in published} == {"info"}
    entry = published[0]
    assert set(entry) >= {"code", "ip", "latency", "level", "method", "msg", "namespace", "path", "pool", "query"}
    assert (entry["code"], entry["pool"], entry["namespace"], entry["msg"]) == (201, "default", "many", "")
    assert isinstance(entry["latency"], int)  # a Go Duration: nanoseconds
    assert token not in (logs / "access.log").read_text()
    errors = [json.loads(line) for line in (logs / "error.log").read_text().splitlines()]
    started = [entry for entry in errors if entry["msg"].startswith(f"lmstfy-py {__version__}: data ")]
    assert len(started) == 1 and started[0]["level"] == "info"
    # -bt info: info lines and worse name their source.
    assert started[0]["bt_func"] == "lmstfy_py.cli._announce"
    assert re.fullmatch(r".*/lmstfy_py/cli\.py:\d+", started[0]["bt_line"])


def test_sigusr1_reopens_the_log_files(tmp_path: Path, redis_port: int) -> None:
    logs = tmp_path / "logs"
    with lmstfy_server(tmp_path, redis_port, "--workers", "2", extra=f'LogDir = "{logs}"') as server:
        server.start()
        (logs / "access.log").rename(logs / "access.log.1")  # logrotate's move
        server.signal(signal.SIGUSR1)
        assert wait_until((logs / "access.log").exists, OUTPUT_TIMEOUT)
        for _ in range(4):  # requests reach both workers
            httpx.get(f"{server.data_url}/api/ns/q/size", headers={"X-Request-ID": "after-rotate"})
        wait_for((logs / "access.log").read_text, "after-rotate")
        assert server.running
    assert "after-rotate" not in (logs / "access.log.1").read_text()


# -- metrics -------------------------------------------------------------------------------

SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.M)


def samples(text: str, name: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', labels)) for found, labels, _ in SAMPLE.findall(text) if found == name]


def test_metrics_name_every_worker_and_lmstfy_http_labels(tmp_path: Path, redis_port: int) -> None:
    with lmstfy_server(tmp_path, redis_port, "--workers", "2") as server:
        server.start()
        token = new_token(server, "metered")
        for _ in range(8):
            httpx.put(f"{server.data_url}/api/metered/q", content=b"x", headers={"X-Token": token})
        text = httpx.get(f"{server.admin_url}/metrics").text
    for family in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds"):
        assert sorted(labels["worker"] for labels in samples(text, family)) == ["0", "1"], family
    assert "# TYPE process_cpu_seconds_total counter" in text
    codes = samples(text, "infra_lmstfy_http_http_codes")
    assert {
        "pool": "default",
        "namespace": "metered",
        "api": "/api/:namespace/:queue",
        "method": "PUT",
        "code": "201",
    } in codes
