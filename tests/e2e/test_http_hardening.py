"""How connections end, on real `lmstfy-py serve` processes, seen through raw sockets, under each
HTTP server `serve` offers.

A client library would hide what is tested here (it follows redirects, reconnects, reads ahead,
drops a `Connection` header): the body deadline (408), a refused body (413, on its
Content-Length or on a chunk's size line) closing its connection without the server handling the
rest, the lingering close that lets a client still sending read its answer, malformed requests
and oversized heads refused by the HTTP server itself (JSON 400, 431), no redirect for any
spelling of a path, the keep-alive idle timeout, and a SIGTERM, idle or under load, answering
every request that had arrived.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis

from benchmarks.harness.lmstfy_servers import NS, QUEUE, Server, create_token, free_port_besides
from benchmarks.harness.redis_servers import free_port
from lmstfy_py.store import keys
from tests.conftest import EVERY_HTTP_SERVER
from tests.e2e.test_e2e import make_lmstfy_server

__all__ = ["make_lmstfy_server"]  # the fixture, shared with test_e2e

# Every test here runs under each HTTP server `serve` offers: they keep the same promises.
HTTP_SERVERS = EVERY_HTTP_SERVER

BODY_TIMEOUT_S = 2  # configured below; the default is 30
KEEP_ALIVE_S = 2  # configured below; the default is 5
# What a deadline may be late by on a loaded 2-core machine: a scheduling margin, not a tolerance for slowness.
LATE_S = 1.0
MIB = 1 << 20
STOP_WITHIN_S = 2.0  # "promptly": well under the 5 s graceful timeout
LOAD_CLIENTS = 32


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


def head(method: str, path: str, *headers: str) -> bytes:
    # A loopback name: the admin port answers other names 421 (tests/web/test_admin_hosts.py).
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", *headers, "", ""]
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


def read_answers(sock: socket.socket, count: int, timeout: float = 5.0) -> list[Answer]:
    """`count` pipelined answers with Content-Length bodies, which may come in one read."""
    sock.settimeout(timeout)
    raw, answers = b"", []
    while len(answers) < count:
        head_end = raw.find(b"\r\n\r\n")
        if head_end >= 0:
            status_line, *header_lines = raw[:head_end].decode("latin-1").split("\r\n")
            headers = {name.strip().lower(): value.strip() for name, value in (h.split(":", 1) for h in header_lines)}
            end = head_end + 4 + int(headers.get("content-length", "0"))
            if len(raw) >= end:
                answers.append(Answer(int(status_line.split()[1]), headers, raw[head_end + 4 : end]))
                raw = raw[end:]
                continue
        chunk = sock.recv(4096)
        assert chunk, f"connection closed after {len(answers)} answers; then got {raw!r}"
        raw += chunk
    assert not raw, f"more bytes than {count} answers: {raw!r}"
    return answers


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True if the server closes `sock` (an orderly FIN, nothing more to read) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


def publish_works(server: Server, token: str) -> bool:
    response = httpx.put(f"{server.data_url}/api/{NS}/{QUEUE}", params={"token": token}, content=b"ok", timeout=5)
    return response.status_code == 201


def write_config(path: Path) -> Path:
    path.write_text(f"[server]\nbody_timeout = {BODY_TIMEOUT_S}\nkeep_alive_timeout = {KEEP_ALIVE_S}\n")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, http_server: str) -> Iterator[Server]:
    """One server with short deadlines for the tests that leave it running."""
    tmp_path = tmp_path_factory.mktemp("hardening")
    port = free_port()
    started = Server(tmp_path, tmp_path / "data", port, free_port_besides(port), http_server=http_server)
    try:
        started.start("--config", str(write_config(tmp_path / "lmstfy.toml")))
        yield started
    finally:
        started.cleanup()


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return create_token(server)


# -- the body deadline --------------------------------------------------------------------


def publish_head(token: str, length: int) -> bytes:
    return head("PUT", f"/api/{NS}/{QUEUE}?token={token}", f"Content-Length: {length}")


def token_head(length: int) -> bytes:
    return head("POST", f"/token/{NS}", "Content-Type: application/x-www-form-urlencoded", f"Content-Length: {length}")


def trickle_until_answered(sock: socket.socket, limit_s: float) -> float:
    """Sends one body byte a second (half a second off the deadline's beat) until the server
    answers; the seconds from the head to the answer."""
    started = time.monotonic()
    next_byte = started + 0.5
    while time.monotonic() - started < limit_s:
        readable, _, _ = select.select([sock], [], [], max(0.0, next_byte - time.monotonic()))
        if readable:
            return time.monotonic() - started
        sock.sendall(b"x")
        next_byte += 1.0
    pytest.fail(f"no answer within {limit_s}s to a body sent at 1 byte/s")


@pytest.mark.parametrize("port_kind", ["data", "admin"])
def test_a_body_sent_at_one_byte_a_second_is_cut_off_at_the_deadline(
    server: Server, token: str, port_kind: str
) -> None:
    port = server.port if port_kind == "data" else server.admin_port
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(publish_head(token, 100) if port_kind == "data" else token_head(100))
        answered_after = trickle_until_answered(sock, BODY_TIMEOUT_S + 10)
        answer = read_answer(sock)
        assert (answer.status, answer.json()) == (408, {"error": "body not received in time"})
        assert answer.headers["connection"] == "close"
        assert "x-request-id" in answer.headers  # rendered like every other error
        assert BODY_TIMEOUT_S - 0.1 <= answered_after <= BODY_TIMEOUT_S + LATE_S
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


async def test_two_hundred_slow_bodies_at_once_are_all_cut_off(server: Server, token: str) -> None:
    async def slow_client() -> tuple[int, str, bytes, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started = time.monotonic()
        writer.write(publish_head(token, 1000))

        async def trickle() -> None:
            await asyncio.sleep(0.5)
            while True:
                writer.write(b"x")
                await asyncio.sleep(1.0)

        trickling = asyncio.create_task(trickle())
        try:
            status_line = await asyncio.wait_for(reader.readline(), BODY_TIMEOUT_S + 10)
            answered_after = time.monotonic() - started
            answer_head = await reader.readuntil(b"\r\n\r\n")
        finally:
            trickling.cancel()
        rest = await asyncio.wait_for(reader.read(), LATE_S)  # the body, then EOF
        writer.close()
        connection = "close" if b"\r\nconnection: close\r\n" in b"\r\n" + answer_head.lower() else "keep-alive"
        return int(status_line.split()[1]), connection, rest, answered_after

    results = await asyncio.gather(*(slow_client() for _ in range(200)))
    assert {(status, connection, rest) for status, connection, rest, _ in results} == {
        (408, "close", b'{"error":"body not received in time"}')
    }
    # Connections were opened over a moment: each one's deadline counts from its own head.
    assert max(answered_after for *_, answered_after in results) <= BODY_TIMEOUT_S + LATE_S
    assert publish_works(server, token)


# -- refused bodies: 413 ----------------------------------------------------------------------


def test_a_declared_100_mb_body_is_refused_at_once_and_the_connection_closed(server: Server, token: str) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        started = time.monotonic()
        sock.sendall(publish_head(token, 100_000_000) + b"x" * 1024)  # all the client ever sends
        answer = read_answer(sock)
        answered_in = time.monotonic() - started
        assert (answer.status, answer.json()) == (413, {"error": "body too large"})
        assert answer.headers["connection"] == "close"
        assert answered_in < 1.0  # without waiting for the other 99.99 MB
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)  # the next connection works


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_chunked_body_passing_1_mib_is_refused_and_the_connection_closed(server: Server, token: str) -> None:
    piece = b"x" * 65536
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head("PUT", f"/api/{NS}/{QUEUE}?token={token}", "Transfer-Encoding: chunked"))
        for _ in range(MIB // len(piece)):
            sock.sendall(chunk(piece))
        sock.sendall(chunk(b"x"))  # one byte past the limit, and no end: the server must not wait for one
        answer = read_answer(sock)
        assert (answer.status, answer.json()) == (413, {"error": "body too large"})
        assert answer.headers["connection"] == "close"
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


def test_a_chunked_body_of_exactly_1_mib_is_published(server: Server, token: str) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head("PUT", f"/api/{NS}/{QUEUE}?token={token}", "Transfer-Encoding: chunked"))
        sock.sendall(chunk(b"x" * (MIB // 2)) + chunk(b"y" * (MIB // 2)) + b"0\r\n\r\n")
        answer = read_answer(sock)
        assert answer.status == 201, answer.body
        assert answer.headers.get("connection") != "close"
        sock.sendall(head("GET", f"/api/{NS}/{QUEUE}/size"))  # the same connection carries the next request
        assert read_answer(sock).status == 200


def trickle(sock: socket.socket, pieces: list[bytes]) -> None:
    """Sends `pieces` 50 ms apart: each one a read of its own for the server."""
    for piece in pieces:
        sock.sendall(piece)
        time.sleep(0.05)


# A chunk's size line alone, never followed by the data it announces: what the server must refuse on.
OVERSIZED_CHUNKS = {
    "a 2 MiB chunk": [b"200000\r\n"],
    "its size line in pieces, with leading zeros and an extension": [
        b"0000",
        b"0020",
        b"0000;na",
        b"me=value\r",
        b"\n",
    ],
    "a chunk passing 1 MiB after 1 MiB of data": [chunk(b"x" * (MIB // 2)), chunk(b"y" * (MIB // 2)), b"1\r\n"],
}


@pytest.mark.parametrize("port_kind", ["data", "admin"])
@pytest.mark.parametrize("pieces", OVERSIZED_CHUNKS.values(), ids=OVERSIZED_CHUNKS.keys())
def test_a_chunk_announcing_a_body_over_1_mib_is_refused_before_its_data(
    server: Server, token: str, port_kind: str, pieces: list[bytes]
) -> None:
    if port_kind == "data":
        port, request = server.port, head("PUT", f"/api/{NS}/{QUEUE}?token={token}", "Transfer-Encoding: chunked")
    else:  # a Host the admin port answers
        request = head("POST", f"/token/{NS}", "Transfer-Encoding: chunked")
        port = server.admin_port
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        trickle(sock, pieces)
        try:
            answer = read_answer(sock, timeout=1.0)  # not body_timeout later
        except TimeoutError:
            pytest.fail("no answer within 1 s to a chunk announcing more than 1 MiB")
        assert (answer.status, answer.json()) == (413, {"error": "body too large"})
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["connection"] == "close"
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


def test_a_chunked_body_with_a_trailer_is_published(server: Server, token: str) -> None:
    """The trailer comes in the read that ends the last chunk's size line, and its name reads as hex:
    nothing in it is taken for a chunk's size."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head("PUT", f"/api/{NS}/{QUEUE}?token={token}", "Transfer-Encoding: chunked"))
        trickle(sock, [chunk(b"ab") + b"0\r\nffffffff-x: 1\r\n", b"\r\n"])
        answer = read_answer(sock)
        assert answer.status == 201, answer.body


def test_sigterm_after_a_413_stops_at_once_without_a_traceback(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start()
    token = create_token(server)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(publish_head(token, 100_000_000))
        # Keep sending, as an upload does, until the server answers: its read buffers fill.
        sock.setblocking(False)
        sent, piece = 0, b"x" * 65536
        deadline = time.monotonic() + 5
        while not select.select([sock], [], [], 0)[0] and time.monotonic() < deadline:
            try:
                sent += sock.send(piece)
            except BlockingIOError:
                time.sleep(0.01)
        sock.setblocking(True)
        answer = read_answer(sock)
        assert answer.status == 413
        assert sent < 100_000_000
        started = time.monotonic()
        server.signal(signal.SIGTERM)  # the client still holds its socket open
        assert server.wait(STOP_WITHIN_S + 3) == 0, server.stderr()
        stopped_in = time.monotonic() - started
    assert stopped_in < STOP_WITHIN_S
    assert "Traceback" not in server.stderr()
    assert "cut off" not in server.stderr()


# -- requests the HTTP server refuses before the app sees them ----------------------------------

MALFORMED = {
    "not HTTP": b"BLAH\r\n\r\n",
    "a Content-Length that is no number": head("PUT", f"/api/{NS}/{QUEUE}", "Content-Length: abc"),
    "a header name with a space": head("GET", f"/api/{NS}/{QUEUE}/size", "Bad Header: y"),
    "a chunk size that is no number": head("PUT", f"/api/{NS}/{QUEUE}", "Transfer-Encoding: chunked") + b"zz\r\n",
}
MAX_HEAD = 16 * 1024


@pytest.mark.parametrize("port_kind", ["data", "admin"])
@pytest.mark.parametrize("request_bytes", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_request_gets_a_json_400_and_its_connection_closed(
    server: Server, token: str, port_kind: str, request_bytes: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", server.port if port_kind == "data" else server.admin_port)) as sock:
        sock.sendall(request_bytes)
        answer = read_answer(sock)
        assert (answer.status, answer.json()) == (400, {"error": "invalid HTTP request"})
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["connection"] == "close"
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


# Malformed from their first bytes, their heads never ended: httptools refuses each at once.
# (h11, under hypercorn, waits for a head's end: such a client meets the keep-alive timeout there.)
UNENDED = {
    "not HTTP": b"BLAH\r\n",
    "a bare LF": b"GET /api/ns/q HTTP/1.1\nHost: localhost\n\n",
    "a TLS hello": bytes.fromhex("160301020001000100fc0303"),
}


@pytest.mark.parametrize("request_bytes", UNENDED.values(), ids=UNENDED.keys())
def test_under_uvicorn_a_request_malformed_from_its_first_bytes_gets_its_400_at_once(
    server: Server, http_server: str, request_bytes: bytes
) -> None:
    """uvicorn_plain.py's protocol, which reads a data connection's first requests, passes such a
    request to uvicorn at once, rather than waiting for a head's end that never comes."""
    if http_server != "uvicorn":
        pytest.skip("h11 waits for the head's end")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(request_bytes)
        answer = read_answer(sock, timeout=KEEP_ALIVE_S - 0.5)  # not the idle close's silence
        assert (answer.status, answer.json()) == (400, {"error": "invalid HTTP request"})
        assert closed_by_server(sock, LATE_S)


def send_until_answered(sock: socket.socket, pieces: Iterator[bytes]) -> None:
    """Sends `pieces` a few ms apart (separate reads for the server) until the server answers or closes."""
    for piece in pieces:
        if select.select([sock], [], [], 0.02)[0]:
            return
        try:
            sock.sendall(piece)
        except OSError:  # it answered and closed while this piece was on its way
            return


def many_headers() -> Iterator[bytes]:
    for batch in range(64):
        yield b"".join(b"X-Header-%d: y\r\n" % (batch * 1000 + number) for number in range(200))


# Heads growing past 16 KiB in separate reads (up to 256 KiB, never ended), each way a head can grow.
OVERSIZED_HEADS = {
    "a long header line": lambda: iter(
        [head("GET", f"/api/{NS}/{QUEUE}/size", "X-Padding: ").removesuffix(b"\r\n\r\n"), *[b"x" * 4096] * 64]
    ),
    "too many headers": lambda: iter([b"GET /version HTTP/1.1\r\nHost: localhost\r\n", *many_headers()]),
    "a long request target": lambda: iter([b"GET /", *[b"a" * 4096] * 64]),
}


@pytest.mark.parametrize("port_kind", ["data", "admin"])
@pytest.mark.parametrize("pieces", OVERSIZED_HEADS.values(), ids=OVERSIZED_HEADS.keys())
def test_a_request_head_over_16_kib_gets_a_json_431_and_its_connection_closed(
    server: Server, token: str, port_kind: str, pieces: Callable[[], Iterator[bytes]]
) -> None:
    with socket.create_connection(("127.0.0.1", server.port if port_kind == "data" else server.admin_port)) as sock:
        send_until_answered(sock, pieces())
        answer = read_answer(sock)
        assert (answer.status, answer.json()) == (431, {"error": "request head too large"})
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["connection"] == "close"
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


# -- a refusal while the client is still sending -------------------------------------------------


SIZE = f"/api/{NS}/{QUEUE}/size"
# Requests refused while their client is still sending, for a token: the port, the request's
# beginning, a piece the client goes on sending, and the status.
STILL_SENDING: dict[str, Callable[[str], tuple[str, bytes, bytes, int]]] = {
    "a head over 16 KiB": lambda _: ("data", head("GET", SIZE, "X-Padding: ")[:-4], b"x" * 4096, 431),
    "a head with too many headers": lambda _: ("admin", head("GET", "/version")[:-2], b"X-H: y\r\n" * 512, 431),
    "a malformed head": lambda _: ("data", head("GET", SIZE, "Bad Header: y"), b"x" * 4096, 400),
    "a chunk announcing 2 MiB": lambda token: (
        "data",
        head("PUT", f"/api/{NS}/{QUEUE}?token={token}", "Transfer-Encoding: chunked") + b"200000\r\n",
        b"x" * 4096,
        413,
    ),
    "a declared 100 MB body": lambda token: ("data", publish_head(token, 100_000_000), b"x" * 4096, 413),
}


@pytest.mark.parametrize("case", STILL_SENDING)
def test_a_refused_client_that_goes_on_sending_gets_its_whole_answer_and_an_orderly_close(
    server: Server, token: str, case: str
) -> None:
    """The server answers and then reads (and drops) what still comes, instead of closing at once: a
    close with bytes unread, or bytes arriving after it, makes the kernel reset the connection,
    and a reset destroys the answer the client had not read yet (RFC 9112, 9.6)."""
    port_kind, start, piece, status = STILL_SENDING[case](token)
    with socket.create_connection(("127.0.0.1", server.port if port_kind == "data" else server.admin_port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(start)
        for _ in range(64):  # 0.3 s and more of sending, most of it after the answer was written
            sock.sendall(piece)
            time.sleep(0.005)
        answer = read_answer(sock)
        assert answer.status == status, answer
        assert answer.headers["connection"] == "close"
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_server(sock, LATE_S)
    assert publish_works(server, token)


def reset_by_server(sock: socket.socket) -> bool:
    """True if the server has closed `sock` for good: a byte sent now is answered with a reset."""
    try:
        sock.sendall(b"x")
        time.sleep(0.1)  # the reset's way back
        sock.sendall(b"x")
        sock.settimeout(1.0)
        sock.recv(1)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


def test_a_refused_client_that_holds_its_connection_open_is_let_go_after_half_a_second(server: Server) -> None:
    """The lingering close ends: a client that read its answer and then neither sends nor closes
    does not hold the server's side of the connection (0.5 s of quiet, lingering.py)."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head("GET", SIZE, "X-Padding: " + "x" * MAX_HEAD)[:-4])
        assert read_answer(sock).status == 431
        assert sock.recv(1) == b""  # the FIN after the answer, at once
        time.sleep(0.5 + LATE_S)
        assert reset_by_server(sock)


def test_a_request_head_under_16_kib_is_served(server: Server) -> None:
    padding = "x" * (MAX_HEAD - 1024)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        request = head("GET", f"/api/{NS}/{QUEUE}/size", f"X-Padding: {padding}")
        send_until_answered(sock, iter([request[i : i + 4096] for i in range(0, len(request), 4096)]))
        assert read_answer(sock).status == 200


def test_a_pipelined_head_after_a_large_body_is_not_counted_with_that_body(server: Server, token: str) -> None:
    # One read that ends a publish's head, carries its 20 KiB body and begins the next request's
    # head: the next head's count starts where it began, not at the read's start (a 431 was written
    # in place of the publish's answer, which ran all the same: a client retrying it published twice).
    body = b"x" * (20 * 1024)
    publish = head("PUT", f"/api/{NS}/{QUEUE}?token={token}", f"Content-Length: {len(body)}")
    size = head("GET", f"/api/{NS}/{QUEUE}/size")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in (publish[:20], publish[20:] + body + size[:10], size[10:]):  # three reads
            sock.sendall(piece)
            time.sleep(0.1)
        published, sized = read_answers(sock, 2)
    assert published.status == 201, published
    assert (sized.status, sized.headers.get("connection")) == (200, None), sized


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
        # The Host header a redirect used to be built from (the admin port refuses a name it does
        # not know with 421, so there it is a loopback name).
        request = head(method, path, f"X-Token: {token}", "Content-Length: 0")
        if port_kind == "data":
            request = request.replace(b"Host: localhost", b"Host: evil.example")
        sock.sendall(request)
        answer = read_answer(sock)
    assert (answer.status, answer.headers.get("location")) == (404, None)
    assert answer.json() == {"error": "api not found"}


# -- the keep-alive idle timeout ------------------------------------------------------------------


BEFORE_IDLE = [
    "an answered request",
    "an answered hot request",  # under uvicorn, answered by uvicorn_plain.py's protocol, the others by uvicorn's
    "an answered hot request and half the next head, pipelined",
    "nothing",
    "half a request head",
]


@pytest.mark.parametrize("before", BEFORE_IDLE)
def test_a_connection_waiting_for_a_request_is_closed_after_the_keep_alive_timeout(
    server: Server, token: str, before: str
) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        publish = publish_head(token, 2) + b"ok"
        if before == "an answered request":
            sock.sendall(head("GET", f"/api/{NS}/{QUEUE}/size"))
            assert read_answer(sock).status == 200
        elif before.startswith("an answered hot request"):
            sock.sendall(publish + (b"PUT /api/" if before.endswith("pipelined") else b""))
            assert read_answer(sock).status == 201
        elif before == "half a request head":
            sock.sendall(b"GET /api/ns/q/size HTTP/1.1\r\nHost: x\r\n")
        idle_since = time.monotonic()
        assert not closed_by_server(sock, KEEP_ALIVE_S - 0.3)
        assert closed_by_server(sock, 0.3 + LATE_S)
        closed_after = time.monotonic() - idle_since
    assert KEEP_ALIVE_S - 0.3 <= closed_after <= KEEP_ALIVE_S + LATE_S


# -- SIGTERM -----------------------------------------------------------------------------------


LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a listening socket per worker (SO_REUSEPORT), TCP_INFO: Linux"
)


@LINUX_ONLY
def test_a_stopping_server_refuses_new_connections_at_once(
    make_lmstfy_server: Callable[[], Server], tmp_path: Path
) -> None:
    server = make_lmstfy_server().start("--workers", "2", "--config", str(write_config(tmp_path / "lmstfy.toml")))
    token = create_token(server)
    with socket.create_connection(("127.0.0.1", server.port)) as busy:
        # A body that arrives slowly keeps the server in its graceful stop until the deadline.
        busy.sendall(publish_head(token, 100) + b"x")
        time.sleep(0.3)
        server.signal(signal.SIGTERM)
        assert refused_while_busy(server.port, busy), "a new connection was accepted during the graceful stop"
        answer = read_answer(busy, BODY_TIMEOUT_S + 5)
        assert (answer.status, answer.headers["connection"]) == (408, "close")
    assert server.wait(STOP_WITHIN_S + 3) == 0, server.stderr()


def refused_while_busy(port: int, busy: socket.socket) -> bool:
    """True once a new connection to `port` is refused while `busy` still waits for its answer (the
    graceful stop is still going). The signal takes a moment to reach every worker on a loaded
    machine, so this tries again until then rather than after a fixed sleep (0.3 s failed a CI run)."""
    while not select.select([busy], [], [], 0)[0]:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except (ConnectionRefusedError, ConnectionResetError):
            # Reset: it reached the listening socket's queue just as the stop closed it (a CI run).
            return True
        time.sleep(0.05)
    return False


def stopped_while_frozen(server: Server, token: str, connect: Callable[[], list[socket.socket]]) -> None:
    """Freezes the server, makes its clients (`connect`) send a publish each, sends SIGTERM, thaws it,
    and checks what a client relies on: every publish answered 201 with `Connection: close`, every
    connection then closed, the server gone with exit 0."""
    server.signal(signal.SIGSTOP)
    try:
        clients = connect()
        for client in clients:
            client.sendall(publish_head(token, 1) + b"b")
        server.signal(signal.SIGTERM)
    finally:
        server.signal(signal.SIGCONT)
    answers = [read_answer(client) for client in clients]
    assert [(answer.status, answer.headers.get("connection")) for answer in answers] == [(201, "close")] * len(clients)
    assert all(closed_by_server(client, LATE_S) for client in clients)
    for client in clients:
        client.close()
    assert server.wait(STOP_WITHIN_S + 3) == 0, server.stderr()


@LINUX_ONLY
def test_requests_on_connections_not_yet_accepted_at_sigterm_are_answered(
    make_lmstfy_server: Callable[[], Server],
) -> None:
    server = make_lmstfy_server().start("--workers", "1")
    # The kernel accepts these for the frozen process, and queues them with their requests.
    stopped_while_frozen(
        server, create_token(server), lambda: [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    )


@LINUX_ONLY
def test_requests_waiting_on_keep_alive_connections_at_sigterm_are_answered_and_closed(
    make_lmstfy_server: Callable[[], Server],
) -> None:
    """Each of these connections has a request the server has not read when it is told to stop:
    every one gets its answer, with `Connection: close`, and is then closed."""
    server = make_lmstfy_server().start("--workers", "1")
    token = create_token(server)
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    for client in clients:  # each a keep-alive connection with a request behind it
        client.sendall(publish_head(token, 1) + b"a")
        assert read_answer(client).status == 201
    stopped_while_frozen(server, token, lambda: clients)


@LINUX_ONLY
def test_an_answer_with_a_request_pipelined_behind_it_at_sigterm_says_close_and_ends_the_connection(
    make_lmstfy_server: Callable[[], Server],
) -> None:
    # The pipelined request is not handled (a client resends what was not answered); an answer
    # without `Connection: close` would have the client wait for its answer on a closing connection.
    server = make_lmstfy_server().start("--workers", "1")
    token = create_token(server)
    consume = head("GET", f"/api/{NS}/{QUEUE}?token={token}&ttr=30&timeout=5")
    size = head("GET", f"/api/{NS}/{QUEUE}/size")
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(consume + size)  # both have arrived; the size waits behind the long-poll
        time.sleep(0.5)
        server.signal(signal.SIGTERM)
        answer = read_answer(client, STOP_WITHIN_S + 3)
        assert (answer.status, answer.json(), answer.headers.get("connection")) == (
            404,
            {"msg": "no job available"},
            "close",
        )
        assert closed_by_server(client, LATE_S)
    assert server.wait(STOP_WITHIN_S + 3) == 0, server.stderr()


# -- SIGTERM under load ------------------------------------------------------------------------


@dataclass
class Sent:
    job: bytes
    before_sigterm: bool  # its bytes were all written before the SIGTERM was sent
    status: int = 0  # 0: no answer (the connection was closed)
    job_id: str = ""
    closes: bool = False  # the answer said Connection: close


@dataclass
class Publisher:
    """One keep-alive connection publishing back to back until it is told to close, or closed."""

    number: int
    sent: list[Sent] = field(default_factory=list)


class SigtermRace:
    def __init__(self, server: Server, token: str) -> None:
        self.server = server
        self.token = token
        self.sigterm_sent = False

    async def publish_until_closed(self, publisher: Publisher) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        try:
            while True:
                job = f"{publisher.number}-{len(publisher.sent)}".encode()
                writer.write(publish_head(self.token, len(job)) + job)
                # Written to the socket at once (nothing left in asyncio's buffer): sent.
                assert writer.transport.get_write_buffer_size() == 0
                sent = Sent(job, before_sigterm=not self.sigterm_sent)
                publisher.sent.append(sent)
                try:
                    await self.read_answer(reader, sent)
                except (OSError, asyncio.IncompleteReadError):
                    return
                if sent.closes:
                    return
        finally:
            writer.close()

    async def read_answer(self, reader: asyncio.StreamReader, sent: Sent) -> None:
        answer_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = answer_head.decode("latin-1").split("\r\n")
        headers = dict(
            (name.strip().lower(), value.strip()) for name, value in (h.split(":", 1) for h in lines[1:] if h)
        )
        body = await reader.readexactly(int(headers["content-length"]))
        sent.status = int(lines[0].split()[1])
        sent.closes = headers.get("connection") == "close"
        if sent.status == 201:
            sent.job_id = json.loads(body)["job_id"]

    async def run(self, load_s: float) -> list[Publisher]:
        publishers = [Publisher(number) for number in range(LOAD_CLIENTS)]
        tasks = [asyncio.create_task(self.publish_until_closed(publisher)) for publisher in publishers]
        await asyncio.sleep(load_s)
        assert self.server.proc is not None
        os.kill(self.server.proc.pid, signal.SIGTERM)
        self.sigterm_sent = True  # the same thread as the writers: nothing is written in between
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        return publishers


def stored_job_ids(redis_url: str) -> list[str]:
    with redis.Redis.from_url(redis_url) as client:
        return [keys.unpack_element(element)[1] for element in client.lrange(keys.ready(NS, QUEUE), 0, -1)]


@pytest.mark.parametrize("run", range(3))
async def test_sigterm_under_load_answers_every_request_that_arrived(
    tmp_path: Path, redis_url: str, http_server: str, run: int
) -> None:
    # On the test Redis (--redis-url), which outlives the server and can be inspected after.
    server = Server(tmp_path, redis_url=redis_url, http_server=http_server).start("--workers", "2")
    try:
        token = create_token(server)
        publishers = await SigtermRace(server, token).run(load_s=1.0)
        assert await asyncio.to_thread(server.wait, 10) == 0, server.stderr()
    finally:
        server.cleanup()
    sent = [one for publisher in publishers for one in publisher.sent]
    unanswered = [one for one in sent if not one.status]
    # Each connection's last request, and only that, may go unanswered: when it was sent after
    # the SIGTERM, into a connection the server was closing (the server had not read it).
    assert all(one.status for publisher in publishers for one in publisher.sent[:-1])
    assert [one for one in unanswered if one.before_sigterm] == []
    assert all(one.status == 201 for one in sent if one.status), {one.status for one in sent}
    # Every job answered 201 is stored, and no other: a request carried out always got its answer.
    answered_ids = [one.job_id for one in sent if one.status == 201]
    assert len(answered_ids) > LOAD_CLIENTS  # the load did run
    stored_unanswered = set(stored_job_ids(redis_url)) - set(answered_ids)
    assert not stored_unanswered, f"{len(stored_unanswered)} jobs stored whose publish got no answer"
    assert sorted(stored_job_ids(redis_url)) == sorted(answered_ids)
    # That the server marks its last answer on a connection (Connection: close) is pinned down by
    # test_requests_waiting_on_keep_alive_connections_at_sigterm_are_answered_and_closed: here, whether
    # any connection had a request in flight when its worker saw the stop depends on the machine's
    # speed (under uvicorn all 32 are often idle, their next request unread), so it is not asserted.
    assert "Traceback" not in server.stderr()
