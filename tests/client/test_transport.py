"""How the clients move bytes: AsyncClient's own asyncio network layer (client/asyncio_backend.py)
and the blocking one, against a real server behind a real TLS proxy, and against raw sockets
that answer nothing, answer late, or close an idle keep-alive connection."""

from __future__ import annotations

import asyncio
import base64
import json
import select
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.harness.lmstfy_servers import Server, free_port
from lmstfy_py.client import AsyncClient, Client, Unavailable

NS = "transport"
PUBLISHED = b'{"msg":"published","job_id":"01M80JAJJVYF6PEPP4G0F00000"}'


# -- TLS ---------------------------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    subprocess.run(
        [*request, "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


class TLSProxy(socketserver.ThreadingTCPServer):
    """Terminates TLS and passes the bytes on to `upstream`, one thread per connection."""

    daemon_threads = True

    def __init__(self, cert: Path, key: Path, upstream: tuple[str, int]) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream = upstream
        super().__init__(("127.0.0.1", 0), _Pipe)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client closing a connection mid-handshake (its pool at exit) is not this test's
        # concern; anything else is printed as socketserver does.
        if not isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Pipe(socketserver.BaseRequestHandler):
    server: TLSProxy

    def handle(self) -> None:
        with (
            self.server.context.wrap_socket(self.request, server_side=True) as tls,
            socket.create_connection(self.server.upstream) as plain,
        ):
            ends = {tls: plain, plain: tls}
            while True:
                # A TLS socket may hold decrypted bytes select() cannot see.
                ready = [tls] if tls.pending() else select.select(list(ends), [], [], 10)[0]
                if not ready:
                    return
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    ends[source].sendall(data)


@pytest.fixture
def tls_proxy(lmstfy_server: Server, tmp_path: Path) -> Iterator[tuple[str, ssl.SSLContext]]:
    """An https:// URL of the module's server, and a context that trusts its certificate."""
    cert, key = self_signed(tmp_path)
    proxy = TLSProxy(cert, key, ("127.0.0.1", lmstfy_server.port))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"https://localhost:{proxy.server_address[1]}", ssl.create_default_context(cafile=str(cert))
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_blocking_client_speaks_https(tls_proxy: tuple[str, ssl.SSLContext], namespace: str, token: str) -> None:
    url, trust = tls_proxy
    with Client(url, namespace, token, ssl_context=trust, retries=0) as client:
        job_id = client.publish("q", b"over tls")
        job = client.consume("q")
        assert job is not None and (job.id, job.data) == (job_id, b"over tls")


async def test_the_async_client_speaks_https(tls_proxy: tuple[str, ssl.SSLContext], namespace: str, token: str) -> None:
    url, trust = tls_proxy
    async with AsyncClient(url, namespace, token, ssl_context=trust, retries=0) as client:
        ids = [await client.publish("q", b"x" * 200_000) for _ in range(3)]  # writes larger than a TLS record
        jobs = await client.consume_many("q", 10)
        assert [job.id for job in jobs] == ids and all(job.data == b"x" * 200_000 for job in jobs)


async def test_a_certificate_the_client_does_not_trust_fails_to_connect(
    tls_proxy: tuple[str, ssl.SSLContext], namespace: str, token: str
) -> None:
    url, _ = tls_proxy
    async with AsyncClient(url, namespace, token, retries=0) as client:  # the system's CAs only
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED") as caught:
            await client.size("q")
    assert not caught.value.sent  # the handshake failed: no request was written


# -- raw sockets -------------------------------------------------------------------------------------


class RawServer:
    """Accepts connections and reads requests; `answer` is sent to each (or nothing when None),
    after which the connection is closed `close_after` seconds later (None: kept open)."""

    def __init__(self, answer: bytes | None, close_after: float | None) -> None:
        self.answer, self.close_after = answer, close_after
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.requests = 0
        self._open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                return
            received += chunk
        self.requests += 1
        if self.answer is not None:
            conn.sendall(self.answer)
        if self.close_after is not None:
            time.sleep(self.close_after)
            conn.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self._open:
            conn.close()


@pytest.fixture
def raw_servers() -> Iterator[list[RawServer]]:
    made: list[RawServer] = []
    yield made
    for server in made:
        server.close()


async def test_a_read_timeout_is_unavailable_after_sending(raw_servers: list[RawServer]) -> None:
    silent = RawServer(answer=None, close_after=None)
    raw_servers.append(silent)
    async with AsyncClient(silent.url, NS, "token", timeout=0.3, retries=2, backoff=0.01) as client:
        started = time.monotonic()
        with pytest.raises(Unavailable, match="timed out") as caught:
            await client.publish("q", b"x")
        assert 0.3 <= time.monotonic() - started < 3
    assert caught.value.sent and silent.requests == 1  # may have been stored: not sent again


async def test_a_refused_connection_is_unavailable_never_sent() -> None:
    async with AsyncClient(f"http://127.0.0.1:{free_port()}", NS, "token", retries=2, backoff=0.01) as client:
        with pytest.raises(Unavailable, match="cannot reach the server") as caught:
            await client.publish("q", b"x")
    assert not caught.value.sent


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_idle_connection_the_server_closed_is_not_used_again(raw_servers: list[RawServer], kind: str) -> None:
    """A publish without job_id cannot be sent twice: sent into a connection the server has closed
    it would fail. The client sees the close while the connection is idle, and opens another."""
    answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(PUBLISHED),
        PUBLISHED,
    )
    closing = RawServer(answer, close_after=0.05)
    raw_servers.append(closing)
    if kind == "async":
        async with AsyncClient(closing.url, NS, "token", retries=0) as aclient:
            await aclient.publish("q", b"1")
            await asyncio.sleep(0.3)  # the server closed it meanwhile
            await aclient.publish("q", b"2")
    else:
        with Client(closing.url, NS, "token", retries=0) as client:
            client.publish("q", b"1")
            time.sleep(0.3)
            client.publish("q", b"2")
    assert (closing.connections, closing.requests) == (2, 2)


# -- AsyncClient's HTTP/1.1 (client/http11.py) ---------------------------------------------------------


def job_object(job_id: str, data: bytes) -> dict[str, object]:
    encoded = base64.b64encode(data).decode()
    return {
        "job_id": job_id,
        "namespace": NS,
        "queue": "q",
        "data": encoded,
        "ttl": 0,
        "elapsed_ms": 5,
        "remain_tries": 2,
    }


def chunked(status: str, body: bytes, pieces: int) -> bytes:
    size = -(-len(body) // pieces)
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (body[i : i + size] for i in range(0, len(body), size))
    )
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        + chunks
        + b"0\r\n\r\n"
    )


async def test_a_chunked_answer_is_read_whole(raw_servers: list[RawServer]) -> None:
    """Go lmstfy sends a consume of many jobs chunked: every job of every chunk is read."""
    jobs = [job_object(f"01M80JAJJVYF6PEPP4G0F{n:05d}", b"payload %d" % n * 50) for n in range(40)]
    server = RawServer(chunked("200 OK", json.dumps(jobs).encode(), pieces=7), close_after=None)
    raw_servers.append(server)
    async with AsyncClient(server.url, NS, "token", retries=0) as client:
        found = await client.consume_many("q", 40)
    assert [(job.id, job.data) for job in found] == [(j["job_id"], b"payload %d" % n * 50) for n, j in enumerate(jobs)]


async def test_an_answer_ending_with_its_connection_is_read_whole(raw_servers: list[RawServer]) -> None:
    """No length, no chunks: the body is what came before the close (HTTP/1.0's framing)."""
    server = RawServer(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n\r\n" + PUBLISHED, close_after=0.05)
    raw_servers.append(server)
    async with AsyncClient(server.url, NS, "token", retries=0) as client:
        assert await client.publish("q", b"x") == "01M80JAJJVYF6PEPP4G0F00000"


async def test_a_connection_the_answer_closes_is_not_used_again(raw_servers: list[RawServer]) -> None:
    """`Connection: close`: the next request opens another connection (this server reads one request
    per connection, so a reuse would wait for an answer that never comes)."""
    answer = b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(PUBLISHED), PUBLISHED)
    server = RawServer(answer, close_after=None)
    raw_servers.append(server)
    async with AsyncClient(server.url, NS, "token", timeout=2, retries=0) as client:
        for n in range(3):
            assert await client.publish("q", b"%d" % n) == "01M80JAJJVYF6PEPP4G0F00000"
    assert (server.connections, server.requests) == (3, 3)


async def test_keep_alive_answers_reuse_one_connection(lmstfy_server: Server, namespace: str, token: str) -> None:
    async with AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as client:
        for n in range(20):
            await client.publish("keep", b"%d" % n)
        assert await client.size("keep") == 20
        assert len(client._connections.idle) == 1  # one connection carried the 21 requests


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nshort", "connection closed mid-answer"),
        (b"NOT HTTP AT ALL\r\n\r\n", "malformed answer"),
        (b"", "connection closed before any answer"),
    ],
)
async def test_a_broken_answer_is_unavailable_after_sending(
    raw_servers: list[RawServer], answer: bytes, match: str
) -> None:
    server = RawServer(answer, close_after=0.01)
    raw_servers.append(server)
    async with AsyncClient(server.url, NS, "token", timeout=2, retries=2, backoff=0.01) as client:
        with pytest.raises(Unavailable, match=match) as caught:
            await client.publish("q", b"x")
    assert caught.value.sent and server.requests == 1  # a publish without job_id is never sent twice


async def test_a_cancelled_request_leaves_no_answer_for_the_next(raw_servers: list[RawServer]) -> None:
    """The answer of a request given up on still comes; the next request must not read it as its own."""
    late = RawServer(None, close_after=None)
    raw_servers.append(late)
    async with AsyncClient(late.url, NS, "token", timeout=5, retries=0) as client:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.publish("q", b"first"), 0.2)
        late.answer = b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s" % (len(PUBLISHED), PUBLISHED)
        assert await client.publish("q", b"second") == "01M80JAJJVYF6PEPP4G0F00000"
    assert late.connections == 2


async def test_requests_past_the_connection_limit_wait_for_a_free_one(
    lmstfy_server: Server, namespace: str, token: str
) -> None:
    async with AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as client:
        client._connections.limit = 2
        ids = await asyncio.gather(*(client.publish("limited", b"%d" % n) for n in range(10)))
        assert len(set(ids)) == 10 and await client.size("limited") == 10
        assert len(client._connections.idle) == 2


async def test_no_free_connection_within_the_timeout_is_unavailable_never_sent(raw_servers: list[RawServer]) -> None:
    silent = RawServer(None, close_after=None)
    raw_servers.append(silent)
    async with AsyncClient(silent.url, NS, "token", timeout=0.3, retries=0) as client:
        client._connections.limit = 1
        long_poll = asyncio.ensure_future(client.consume("q", timeout=3))  # holds the connection 3.3 s
        await asyncio.sleep(0.05)
        with pytest.raises(Unavailable, match="waiting for a free connection") as caught:
            await client.publish("q", b"second")
        assert not caught.value.sent
        long_poll.cancel()
    assert silent.requests == 1


async def test_closing_the_client_ends_a_request_in_flight(lmstfy_server: Server, namespace: str, token: str) -> None:
    """As httpcore's pool did: close() ends every connection, a long-poll's too, at once."""
    client = AsyncClient(lmstfy_server.data_url, namespace, token, retries=0)
    long_poll = asyncio.ensure_future(client.consume("nothing-here", timeout=5))
    await asyncio.sleep(0.3)  # it waits on the server
    started = time.monotonic()
    await client.close()
    with pytest.raises(Unavailable, match="closed before any answer"):
        await long_poll
    assert time.monotonic() - started < 1
    assert not client._connections.idle and not client._connections.busy
