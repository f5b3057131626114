"""What the client sends again, against a real server whose Redis is away (503), a raw socket
that reads requests and never answers (a lost answer), or no server at all: a publish without a
business job_id is never repeated once it may have reached the server, everything is repeated
when the connection was refused, and repeatable calls come through when the server recovers
during their retries."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.harness.lmstfy_servers import Server, create_token, free_port
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.client import Client, Unavailable

T = TypeVar("T")
NS = "retries"


@pytest.fixture
def lmstfy_server(tmp_path: Path, redis_url: str) -> Iterator[Server]:
    """A server on the session's external Redis, which a test may stop (the next test's redis_url restarts it).

    One worker: the requests it saw are counted by its metrics, which a scrape reads exactly only from the
    worker that counted them (another worker's counts reach the files within a second: metrics/pending.py).
    """
    with Server(tmp_path, redis_url=redis_url, args=["--workers", "1"]) as running:
        yield running.start()


def requests_seen(lmstfy_server: Server, method: str, route: str, status: str) -> float:
    text = httpx.get(f"{lmstfy_server.admin_url}/metrics", timeout=10).text
    wanted = {"app": "data", "method": method, "route": route, "status": status}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lmstfy_http_requests_total" and wanted.items() <= sample.labels.items():
                return sample.value
    return 0.0


def test_a_503_is_unavailable_with_the_servers_message(lmstfy_server: Server, redis_server: RedisProcess) -> None:
    token = create_token(lmstfy_server, NS)
    redis_server.stop()
    with Client(lmstfy_server.data_url, NS, token, retries=0) as client, pytest.raises(Unavailable) as caught:
        client.publish("q", b"x")
    assert caught.value.status == 503 and caught.value.sent
    assert caught.value.message == "storage unavailable: cannot connect to redis"


def test_a_publish_without_job_id_is_not_repeated_after_a_503(
    lmstfy_server: Server, redis_server: RedisProcess
) -> None:
    token = create_token(lmstfy_server, NS)
    redis_server.stop()
    route = "/api/{ns}/{queue}"
    with Client(lmstfy_server.data_url, NS, token, retries=3, backoff=0.01, max_backoff=0.05) as client:
        with pytest.raises(Unavailable):
            client.publish("q", b"x")
        # The server may have stored it before it failed: a repeat could store it twice.
        assert requests_seen(lmstfy_server, "PUT", route, "503") == 1
        with pytest.raises(Unavailable):
            client.publish("q", b"x", job_id="order-7")
        # With a business id a repeat is answered "duplicate": sent 1 + 3 times.
        assert requests_seen(lmstfy_server, "PUT", route, "503") == 1 + 4
        with pytest.raises(Unavailable):
            client.consume("q")  # at least once anyway: repeated
        assert requests_seen(lmstfy_server, "GET", route, "503") == 4


def in_thread(call: Callable[[], T]) -> Callable[[], T]:
    """Runs `call` in a thread; the returned function waits for its result (or raises its error).

    The test's main thread does the restarts: a process dies with the thread that started it
    (PR_SET_PDEATHSIG), so a thread that ends must not start one.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> T:
        thread.join(30)
        if failure:
            raise failure[0]
        return outcome[0]

    return result


def test_a_repeatable_call_comes_through_when_redis_returns(lmstfy_server: Server, redis_server: RedisProcess) -> None:
    token = create_token(lmstfy_server, NS)
    with Client(lmstfy_server.data_url, NS, token, retries=50, backoff=0.05, max_backoff=0.25) as client:
        client.publish("q", b"x")
        redis_server.stop()  # a restart empties this Redis: the size is 0 after it
        size = in_thread(lambda: client.size("q"))
        time.sleep(0.5)
        redis_server.start()
        assert size() == 0


def test_a_refused_connection_is_retried_even_for_a_publish(lmstfy_server: Server) -> None:
    """The server is restarting: refused connections prove the publish never reached it, so
    sending it again cannot double the job."""
    token = create_token(lmstfy_server, NS)
    assert lmstfy_server.stop() == 0
    with Client(lmstfy_server.data_url, NS, token, retries=50, backoff=0.05, max_backoff=0.3) as client:
        publish = in_thread(lambda: client.publish("q", b"x"))
        time.sleep(0.3)
        lmstfy_server.start()
        job_id = publish()
        assert client.size("q") == 1
        job = client.consume("q")
        assert job is not None and job.id == job_id


class Unanswering:
    """A raw socket server that reads each request whole, counts it, and closes the connection
    without a word: the request reached the server, its answer was lost."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                received = b""
                while b"\r\n\r\n" not in received and (chunk := conn.recv(65536)):
                    received += chunk
                if received:
                    self.requests.append(received.split(b"\r\n", 1)[0])

    def count(self, request_line: bytes) -> int:
        return sum(1 for line in self.requests if line.startswith(request_line))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def unanswering() -> Iterator[Unanswering]:
    server = Unanswering()
    yield server
    server.close()


def test_a_lost_answer_repeats_a_publish_only_with_a_business_id(unanswering: Unanswering) -> None:
    with Client(unanswering.url, NS, "token", retries=3, backoff=0.01, max_backoff=0.02) as client:
        with pytest.raises(Unavailable) as caught:
            client.publish("q", b"x")
        assert caught.value.sent and caught.value.status is None
        # The server read it and may have stored it: sent once, never again.
        assert unanswering.count(b"PUT /api/retries/q?delay=0 ") == 1
        with pytest.raises(Unavailable):
            client.publish("q", b"x", job_id="order-7")
        assert unanswering.count(b"PUT /api/retries/q?delay=0&job_id=order-7 ") == 1 + 3  # a repeat is a duplicate
        with pytest.raises(Unavailable):
            client.release("q", "some-id")
        assert unanswering.count(b"PUT /api/retries/q/job/some-id/release ") == 1
        with pytest.raises(Unavailable):
            client.ack("q", "some-id")
        assert unanswering.count(b"DELETE /api/retries/q/job/some-id ") == 1 + 3


def test_an_unreachable_server_gives_up_as_unavailable_and_never_sent() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", NS, "token", retries=2, backoff=0.01, max_backoff=0.05) as client:
        started = time.monotonic()
        with pytest.raises(Unavailable) as caught:
            client.publish("q", b"x")
    assert caught.value.status is None and not caught.value.sent
    assert "cannot reach the server" in caught.value.message
    assert time.monotonic() - started < 2
