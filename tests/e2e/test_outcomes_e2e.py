"""SPEC 13 stage A on a real `lmstfy-py serve` with two workers, under each HTTP server: keep through the
lean publish path, a result waiter answered when another process completes the job, settings that
survive a restart, and SIGTERM answering a waiter at once."""

from __future__ import annotations

import base64
import signal
import threading
import time
from collections.abc import Callable

import httpx
import redis

from benchmarks.harness.lmstfy_servers import Server, create_token, wait_until
from lmstfy_py.store import keys
from tests.conftest import EVERY_HTTP_SERVER, make_lmstfy_server

__all__ = ["make_lmstfy_server"]

HTTP_SERVERS = EVERY_HTTP_SERVER
NS = "outcomes"
WAITERS = 8


def reserved(client: httpx.Client, token: str, queue: str, **query: object) -> str:
    published = client.put(f"/api/{NS}/{queue}", params={"token": token, **query}, content=b"job")
    assert published.status_code == 201, published.text
    consumed = client.get(f"/api/{NS}/{queue}", params={"token": token})
    assert consumed.status_code == 200, consumed.text
    job_id: str = consumed.json()["job_id"]
    return job_id


def waiters(url: str, token: str, count: int, wait: int) -> tuple[list[httpx.Response], list[threading.Thread]]:
    """`count` result waits on their own connections (spread over the server's workers)."""
    answers: list[httpx.Response] = []

    def wait_for_result() -> None:
        with httpx.Client(timeout=wait + 10) as own:
            answers.append(own.get(url, params={"wait": wait, "token": token}))

    threads = [threading.Thread(target=wait_for_result) for _ in range(count)]
    for thread in threads:
        thread.start()
    return answers, threads


def test_waiters_on_every_worker_get_the_result_another_process_completed(
    make_lmstfy_server: Callable[[], Server],
) -> None:
    server = make_lmstfy_server().start("--workers", "2")
    token = create_token(server, NS)
    with httpx.Client(base_url=server.data_url, timeout=10) as client:
        job_id = reserved(client, token, "q")  # keep 0: only the waiters see its end
        url = f"{server.data_url}/api/{NS}/q/job/{job_id}/result"
        answers, threads = waiters(url, token, WAITERS, wait=30)
        # Every waiter in place: each counts itself in the job's waiters once subscribed to its end.
        with redis.Redis(unix_socket_path=str(server.redis_socket)) as store:
            counted = keys.waiters(NS, "q", job_id)
            assert wait_until(lambda: int(store.get(counted) or 0) == WAITERS, 15), store.get(counted)
        assert not answers
        completed = client.put(f"/api/{NS}/q/job/{job_id}/complete", params={"token": token}, content=b"42")
        assert completed.json() == {"msg": "completed"}
        for thread in threads:
            thread.join(10)
        assert [answer.status_code for answer in answers] == [200] * WAITERS
        assert {base64.b64decode(answer.json()["result"]) for answer in answers} == {b"42"}
        assert client.get(f"/api/{NS}/q/job/{job_id}", params={"token": token}).status_code == 404  # keep 0


def test_keep_and_settings_through_the_served_app_and_a_restart(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start()
    token = create_token(server, NS)
    with httpx.Client(base_url=server.data_url, timeout=10) as client:
        bad = client.put(f"/api/{NS}/q", params={"token": token, "keep": "2592001"}, content=b"x")
        assert (bad.status_code, bad.json()) == (400, {"error": "invalid keep"})
        job_id = reserved(client, token, "q", keep=600)  # the lean dispatcher's publish
        assert client.delete(f"/api/{NS}/q/job/{job_id}", params={"token": token}).status_code == 204
        record = client.get(f"/api/{NS}/q/job/{job_id}", params={"token": token}).json()
        assert (record["state"], record["result"]) == ("completed", None)
        assert client.put(f"/api/{NS}/q/settings", params={"token": token, "keep": 60}).json()["keep"] == 60
    server.stop()
    again = make_lmstfy_server().start()
    with httpx.Client(base_url=again.data_url, timeout=10) as client:
        assert client.get(f"/api/{NS}/q/settings", params={"token": token}).json()["keep"] == 60
        assert client.get(f"/api/{NS}/q/job/{job_id}/result", params={"token": token}).json()["state"] == "completed"


def test_sigterm_answers_a_waiter_at_once_with_202(make_lmstfy_server: Callable[[], Server]) -> None:
    server = make_lmstfy_server().start()
    token = create_token(server, NS)
    with httpx.Client(base_url=server.data_url, timeout=10) as client:
        job_id = reserved(client, token, "q")
    answers, threads = waiters(f"{server.data_url}/api/{NS}/q/job/{job_id}/result", token, 1, wait=60)
    time.sleep(0.5)
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    threads[0].join(20)
    assert [(answer.status_code, answer.json()["state"]) for answer in answers] == [(202, "reserved")]
    assert time.monotonic() - started < 10  # not the 60 s wait
    assert server.wait(20) == 0
