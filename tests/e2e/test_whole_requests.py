"""A hot route's request whose body came whole with its head is answered exactly as one whose body
came later, on a real `lmstfy-py serve` process, through raw sockets, under each HTTP server.

Under uvicorn the first kind is answered by uvicorn_serve.py straight to the connection (no ASGI
cycle), the second goes the ASGI way under the body deadline; under hypercorn both go the ASGI
way. Either way a client must not tell them apart: same status, same headers in the same order,
same body, same `Connection: close` when the answer came before the body was taken, keep-alive and
pipelining as before.
"""

from __future__ import annotations

import base64
import re
import socket
import time

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import NS, Server
from tests.conftest import EVERY_HTTP_SERVER
from tests.e2e.test_http_hardening import Answer, closed_by_server, head, read_answer, server, token

__all__ = ["server", "token"]  # the fixtures: one server per HTTP server, as test_http_hardening's

HTTP_SERVERS = EVERY_HTTP_SERVER
QUEUE = "whole"
LATER_S = 0.2  # how long the "later" body waits after its head: one read of its own, for certain
# How long a "soon" body waits: a read of its own, within what uvicorn_plain.py waits for (0.1 s),
# as a client writing the head and the body apart (httpx) sends it.
SOON_S = 0.02


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def request(method: str, path: str, body: bytes, *headers: str) -> tuple[bytes, bytes]:
    return head(method, path, f"Content-Length: {len(body)}", *headers), body


def ask(server: Server, message: tuple[bytes, bytes], body_after_s: float) -> tuple[Answer, list[str], bool]:
    """The answer, its header names in order, and whether the server then closed the connection."""
    with connect(server) as sock:
        head_bytes, body = message
        if not body_after_s:
            sock.sendall(head_bytes + body)
        else:
            sock.sendall(head_bytes)
            time.sleep(body_after_s)
            sock.sendall(body)
        sock.settimeout(5)
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += sock.recv(4096)
        names = [line.split(b":", 1)[0].decode() for line in raw.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]]
        answer = _answer_of(raw, sock)
        return answer, names, closed_by_server(sock, 1.0)


def _answer_of(raw: bytes, sock: socket.socket) -> Answer:
    head_text, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head_text.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(4096)
    return Answer(int(status_line.split()[1]), headers, body)


def masked(answer: Answer) -> tuple[int, dict[str, str], bytes]:
    headers = dict(answer.headers, date="*")
    if "x-request-id" in headers and headers["x-request-id"] != "r-1":
        headers["x-request-id"] = "*"
    return answer.status, headers, re.sub(rb'"job_id":"[^"]+"', b'"job_id":"*"', answer.body)


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("published", 201),
        ("no token", 401),
        ("bad delay", 400),
        ("request id", 201),
        ("closing client", 201),
        ("closing client, then not", 201),  # one Connection saying close is enough
    ],
)
def test_a_body_with_its_head_is_answered_as_one_that_came_later(
    server: Server, token: str, case: str, status: int
) -> None:
    path = f"/api/{NS}/{QUEUE}?token={token}"
    message = {
        "published": request("PUT", path, b"hello"),
        "no token": request("PUT", f"/api/{NS}/{QUEUE}", b"hello"),
        "bad delay": request("PUT", path + "&delay=x", b"hello"),
        "request id": request("PUT", path, b"hello", "X-Request-ID: r-1"),
        "closing client": request("PUT", path, b"hello", "Connection: close"),
        "closing client, then not": request("PUT", path, b"hello", "Connection: close", "Connection: keep-alive"),
    }[case]
    whole, whole_names, whole_closed = ask(server, message, 0)
    for body_after_s in (SOON_S, LATER_S):
        later, later_names, later_closed = ask(server, message, body_after_s)
        assert whole.status == status
        assert masked(whole) == masked(later)
        assert whole_names == later_names
        # An answer given before the body was taken ends the connection, whichever way the body came.
        ends = case in ("no token", "bad delay", "closing client", "closing client, then not")
        assert (whole_closed, later_closed) == (ends, ends)
        said = "close" if ends else None
        assert (whole.headers.get("connection"), later.headers.get("connection")) == (said, said)


def test_a_connection_carries_whole_requests_one_after_another_and_pipelined(server: Server, token: str) -> None:
    path = f"/api/{NS}/{QUEUE}p?token={token}"
    with connect(server) as sock:
        for body in (b"one", b"two"):  # keep-alive: one at a time
            sock.sendall(b"".join(request("PUT", path, body)))
            assert read_answer(sock).status == 201
        sock.sendall(b"".join(request("PUT", path, b"three")) + b"".join(request("PUT", path, b"four")))
        assert [read_answer(sock).status, read_answer(sock).status] == [201, 201]  # pipelined in one write
        consumed = []
        for _ in range(4):
            sock.sendall(head("GET", f"/api/{NS}/{QUEUE}p?token={token}&ttr=30"))
            answer = read_answer(sock)
            assert answer.status == 200
            consumed.append(answer.json())
        assert [base64_data(job) for job in consumed] == [b"one", b"two", b"three", b"four"]
        ids = [str(job["job_id"]) for job in consumed]  # type: ignore[index]
        sock.sendall(head("DELETE", f"/api/{NS}/{QUEUE}p/job/{ids[0]}?token={token}"))
        acked = read_answer(sock)
        assert (acked.status, acked.body, "content-length" in acked.headers) == (204, b"", False)
        sock.sendall(head("DELETE", f"/api/{NS}/{QUEUE}p/jobs?token={token}&job_id={','.join(ids[1:])}"))
        assert read_answer(sock).status == 204
        sock.sendall(head("GET", f"/api/{NS}/{QUEUE}p?token={token}"))
        assert read_answer(sock).status == 404  # every job ACKed
        assert not closed_by_server(sock, 0.2)


def test_requests_of_every_kind_pipelined_are_answered_in_order_on_one_connection(server: Server, token: str) -> None:
    """Under uvicorn a connection begins with uvicorn_plain.py's protocol, which answers the plain hot
    requests itself and hands the connection to uvicorn's at the first other request, with the
    bytes it has not answered: across that hand-over nothing is lost, reordered or closed."""
    queue = f"{QUEUE}m"
    publish = b"".join(request("PUT", f"/api/{NS}/{queue}?token={token}", b"m"))
    size = head("GET", f"/api/{NS}/{queue}/size?token={token}")  # not a hot route
    expect = head("PUT", f"/api/{NS}/{queue}?token={token}", "Content-Length: 1", "Expect: 100-continue") + b"m"
    with connect(server) as sock:
        half = len(publish) // 2  # a head in two reads, then the rest and the others in one
        sock.sendall(publish[:half])
        time.sleep(LATER_S)
        sock.sendall(publish[half:] + size + publish + expect + size + publish)
        raw, answers = b"", []
        while len(answers) < 6:
            raw += sock.recv(65536)
            while b"\r\n\r\n" in raw:
                head_text, _, rest = raw.partition(b"\r\n\r\n")
                if head_text.startswith(b"HTTP/1.1 100"):  # the continue asked for
                    raw = rest
                    continue
                length = int(re.search(rb"content-length: (\d+)", head_text.lower())[1])  # type: ignore[index]
                if len(rest) < length:
                    break
                answers.append((int(head_text.split()[1]), rest[:length]))
                raw = rest[length:]
        assert [status for status, _ in answers] == [201, 200, 201, 201, 200, 201]
        assert [answers[1][1], answers[4][1]] == [
            b'{"namespace":"%s","queue":"%s","size":%d}' % (NS.encode(), queue.encode(), count) for count in (1, 3)
        ]
        sock.sendall(publish)  # the connection goes on
        assert read_answer(sock).status == 201
        assert not closed_by_server(sock, 0.2)


def test_a_head_sent_a_byte_at_a_time_is_answered_and_the_connection_goes_on(server: Server, token: str) -> None:
    """Every CRLF split across two reads at some point: uvicorn_plain.py looks at each new piece only
    (for the head's end, and for a bare LF, which would send the request to uvicorn)."""
    publish = b"".join(request("PUT", f"/api/{NS}/{QUEUE}b?token={token}", b"bytes"))
    with connect(server) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a segment, and so a read, each
        for byte in publish:
            sock.sendall(bytes([byte]))
            time.sleep(0.002)
        assert read_answer(sock).status == 201
        sock.sendall(publish)
        assert read_answer(sock).status == 201
        sock.sendall(head("GET", f"/api/{NS}/{QUEUE}b?token={token}&ttr=30"))
        assert base64_data(read_answer(sock).json()) == b"bytes"
        assert not closed_by_server(sock, 0.2)


def base64_data(job: object) -> bytes:
    assert isinstance(job, dict)
    return base64.b64decode(job["data"])


def test_an_http_1_0_request_is_answered_and_its_connection_closed(server: Server, token: str) -> None:
    with connect(server) as sock:
        body = b"old"
        lines = [f"PUT /api/{NS}/{QUEUE}?token={token} HTTP/1.0", "Host: localhost", f"Content-Length: {len(body)}"]
        sock.sendall("\r\n".join([*lines, "", ""]).encode() + body)
        answer = read_answer(sock)
        assert (answer.status, answer.headers.get("connection")) == (201, "close")
        assert closed_by_server(sock, 2.0)


BIG_BODY = b"x" * 20_000  # ~27 KB of base64 in a consumed job
PREFILLED = 1_000
PIPELINED = 10  # consumes of 100 jobs, ~2.7 MB of answer each


def test_a_client_that_does_not_read_its_answers_stops_the_server_from_taking_more_requests(
    server: Server, token: str
) -> None:
    """Pipelined consumes whose answers the client leaves unread: the server waits for the first
    answers to drain before it serves the next requests (as uvicorn's ASGI cycle and hypercorn do),
    instead of reserving every job and holding the answers in its own memory."""
    queue = f"{QUEUE}-unread"
    with httpx.Client(base_url=server.data_url, params={"token": token}, timeout=30) as client:
        for _ in range(PREFILLED // 50):
            bulk = client.put(f"/api/{NS}/{queue}/bulk", json=[BIG_BODY.decode()] * 50)
            assert bulk.status_code == 201, bulk.text
    consume = head("GET", f"/api/{NS}/{queue}?token={token}&count=100&ttr=600")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(consume * PIPELINED)  # and never read
        time.sleep(3)
        stats = httpx.get(f"{server.data_url}/api/{NS}/{queue}/stats", params={"token": token}, timeout=5).json()
    # The kernel's buffers on loopback take a few MB (~2 answers here); ten answers (~27 MB) do not fit.
    assert stats["reserved"] <= PREFILLED // 2, stats
