"""The admin port answers only host names it serves: a DNS-rebinding page gets 421 (web/admin/hosts.py).

A page on evil.example that re-resolves its name to 127.0.0.1 sends its requests to the admin port as
same-origin ones: Host and Origin both say evil.example, so the cross-site check lets them through.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.config import Config, PoolConfig, ServerConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app
from tests.conftest import EVERY_HTTP_SERVER, client_for

HTTP_SERVERS = EVERY_HTTP_SERVER
ALLOWED = "queue.example.com"  # in [admin] allowed_hosts
ROUTES = ["/token/ns", "/version", "/ready", "/metrics", "/ui", "/pools", "/info", "/nowhere"]


@contextmanager
def admin_server(tmp_path: Path, redis_url: str, http_server: str) -> Iterator[Server]:
    config = tmp_path / "lmstfy.toml"
    config.write_text(f"[admin]\nallowed_hosts = {json.dumps([ALLOWED])}\n")
    with Server(tmp_path, redis_url=redis_url, config=config, args=["--workers", "1"], http_server=http_server) as s:
        yield s.start()


def tokens(server: Server) -> dict[str, str]:
    """The namespace's tokens, asked as a program on the machine asks (Host 127.0.0.1:port)."""
    answer = httpx.get(f"{server.admin_url}/token/ns", timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, str] = answer.json()["tokens"]
    return found


def refusal(host: str) -> dict[str, str]:
    return {"error": f"unknown host: {host}; add it to [admin] allowed_hosts"}


def test_a_rebound_name_is_refused_on_every_route(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with admin_server(tmp_path, redis_url, http_server) as server:
        host = f"evil.example:{server.admin_port}"
        rebound = {"Host": host, "Origin": f"http://{host}"}  # what the browser sends: same origin by its name
        made = httpx.post(f"{server.admin_url}/token/ns", params={"description": "x"}, headers=rebound, timeout=10)
        assert (made.status_code, made.json()) == (421, refusal(host))
        assert made.headers["x-request-id"]
        assert tokens(server) == {}  # nothing was created
        for path in ROUTES:
            answer = httpx.get(f"{server.admin_url}{path}", headers=rebound, timeout=10)
            assert (answer.status_code, answer.json()) == (421, refusal(host)), path
        port = server.admin_port
        for other in (
            f"EVIL.example.:{port}",
            "localhost.evil.example",  # a loopback name only at the end
            f"127.0.0.1.evil.example:{port}",  # an address only as the whole name
            f"evil.{ALLOWED}",  # an allowed name's subdomain is another name
            f"evil.example:{port}:1",  # malformed
            f"[::1]evil:{port}",
        ):
            answer = httpx.get(f"{server.admin_url}/token/ns", headers={"Host": other}, timeout=10)
            assert answer.status_code == 421, other


def test_a_long_unknown_host_is_not_echoed_whole(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with admin_server(tmp_path, redis_url, http_server) as server:
        host = "a" * 4000 + ".example"
        answer = httpx.get(f"{server.admin_url}/version", headers={"Host": host}, timeout=10)
    assert answer.status_code == 421
    error = answer.json()["error"]
    assert error == f"unknown host: {'a' * 100}...; add it to [admin] allowed_hosts"


def test_loopback_names_ip_literals_and_allowed_hosts_are_served(
    tmp_path: Path, redis_url: str, http_server: str
) -> None:
    with admin_server(tmp_path, redis_url, http_server) as server:
        port = server.admin_port
        served = [
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            "LocalHost.",  # any case, a trailing dot, no port
            f"dashboard.localhost:{port}",
            f"[::1]:{port}",
            "[::1]",
            f"10.1.2.3:{port}",  # a pod's IP, as a Kubernetes probe sends it
            f"{ALLOWED}:{port}",
            "Queue.Example.COM.",
        ]
        for host in served:
            headers = {"Host": host}
            made = httpx.post(f"{server.admin_url}/token/ns", params={"description": host}, headers=headers, timeout=10)
            assert made.status_code == 201, (host, made.text)
            for path in ("/ready", "/metrics", "/version"):
                assert httpx.get(f"{server.admin_url}{path}", headers=headers, timeout=10).status_code == 200, host
        assert sorted(tokens(server).values()) == sorted(served)


def test_a_request_without_host_is_served(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with (
        admin_server(tmp_path, redis_url, http_server) as server,
        socket.create_connection(("127.0.0.1", server.admin_port), timeout=10) as conn,
    ):
        conn.sendall(b"GET /token/ns HTTP/1.0\r\n\r\n")  # HTTP/1.0 needs no Host
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"200", answer
    assert json.loads(body) == {"tokens": {}}


async def test_the_admin_host_name_it_was_configured_with_is_served(redis_url: str) -> None:
    # A name it binds to, as --admin-host or [server] admin_host: in-process, since it must resolve to bind.
    config = Config(
        server=ServerConfig(admin_host="Queue-Admin.internal"), pools={"default": PoolConfig("default", url=redis_url)}
    )
    runtime = await Runtime.start(config, run_pumps=False)
    try:
        async with client_for(create_admin_app(runtime)) as admin:
            served = await admin.get("/token/ns", headers={"Host": "queue-admin.internal:7778"})
            refused = await admin.get("/token/ns", headers={"Host": "other.internal:7778"})
    finally:
        await runtime.stop()
    assert (served.status_code, served.json()) == (200, {"tokens": {}})
    assert (refused.status_code, refused.json()) == (421, refusal("other.internal:7778"))
