"""How connections end, on real `lmstfy-py serve` processes, seen through raw sockets.

A client library would hide what is tested here (it follows redirects, reconnects, reads ahead,
drops a `Connection` header): no redirect for any spelling of a path.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.redis_procs import free_port
from tests.test_e2e import NS, Server, create_token


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


def head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: lmstfy.test", *headers, "", ""]
    return "\r\n".join(lines).encode()


def read_answer(sock: socket.socket, timeout: float = 5.0) -> Answer:
    """One HTTP/1.1 answer with a Content-Length body, read byte-exact from `sock`."""
    sock.settimeout(timeout)
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed before an answer; got {raw!r}"
        raw += chunk
    head_text, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head_text.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (h.split(":", 1) for h in header_lines)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        assert chunk, "connection closed inside an answer"
        body += chunk
    assert len(body) == length, "more bytes than the answer's Content-Length"
    return Answer(int(status_line.split()[1]), headers, body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that leave it running."""
    tmp_path = tmp_path_factory.mktemp("hardening")
    started = Server(tmp_path, tmp_path / "data", free_port(), free_port())
    try:
        started.start()
        yield started
    finally:
        started.cleanup()


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return create_token(server)


# -- no redirects --------------------------------------------------------------------------------

JOB_ID = "01M80JAJJVYF6PEPP4G0F00000"
DATA_PATHS = [
    f"/api/{NS}/q,%2F",
    f"/api/{NS}/q/job/{JOB_ID}%2F",
    f"/api/{NS}/q/",
    f"/api/{NS}/q/job/{JOB_ID}/",
    f"/api/{NS}/q/size/",
    f"/api/{NS}/q/peek/",
    f"/api/{NS}/q/deadletter/",
    f"/api/{NS}/q/deadletter/size%2F",
    f"/api/{NS}//q",
]
ADMIN_PATHS = ["/version/", "/pools%2F", f"/token/{NS}/", "/info/", "/metrics/", "/limits/", "/accesslog/"]


@pytest.mark.parametrize(
    ("port_kind", "method", "path"),
    [("data", method, path) for path in DATA_PATHS for method in ("GET", "PUT", "DELETE")]
    + [("admin", method, path) for path in ADMIN_PATHS for method in ("GET", "POST")],
)
def test_no_spelling_of_a_path_is_redirected(
    server: Server, token: str, port_kind: str, method: str, path: str
) -> None:
    port = server.port if port_kind == "data" else server.admin_port
    with socket.create_connection(("127.0.0.1", port)) as sock:
        # The Host header a redirect used to be built from.
        request = head(method, path, f"X-Token: {token}", "Content-Length: 0").replace(
            b"Host: lmstfy.test", b"Host: evil.example"
        )
        sock.sendall(request)
        answer = read_answer(sock)
    assert (answer.status, answer.headers.get("location")) == (404, None)
    assert answer.json() == {"error": "api not found"}
