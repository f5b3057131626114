"""SPEC 13 through Client and AsyncClient against a real server: settings, keep, complete, result."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import AsyncClient, BadRequest, Client, Conflict, NotFound, Outcome, Settings


def test_settings_show_and_set(client: Client) -> None:
    assert client.settings("q") == Settings(keep=0, events=0)
    assert client.settings("q", keep=60) == Settings(keep=60, events=0)
    assert client.settings("q", events=10) == Settings(keep=60, events=10)
    assert client.settings("q") == Settings(keep=60, events=10)
    with pytest.raises(BadRequest, match="invalid keep"):
        client.settings("q", keep=2592001)


def test_complete_keeps_a_result_that_result_reads(client: Client) -> None:
    job_id = client.publish("q", b"data", keep=60)
    job = client.consume("q", ttr=30)
    assert job is not None and job.id == job_id
    live = client.result("q", job_id)
    assert isinstance(live, Outcome) and not live.ended
    assert (live.job.state, live.job.result, live.job.finished_ms) == ("reserved", None, None)
    client.complete("q", job_id, result="résultat")
    done = client.result("q", job_id, wait=5)
    assert done.ended and done.job.state == "completed" and done.job.result == "résultat".encode()
    assert done.job.data == b"data" and done.job.finished_ms is not None
    peeked = client.peek_job("q", job_id)
    assert peeked is not None and peeked.result == "résultat".encode()
    with pytest.raises(Conflict, match="job is not reserved"):
        client.complete("q", job_id, result=b"again")
    with pytest.raises(NotFound, match="job not found"):
        client.result("q", "nosuchjob")
    with pytest.raises(BadRequest, match="invalid keep"):
        client.publish("q", b"x", keep=-1)


def test_a_result_wait_returns_at_the_jobs_end(
    client: Client, lmstfy_server: Server, namespace: str, token: str
) -> None:
    job_id = client.publish("q", b"x")  # keep 0: a waiter present at the end still gets it
    job = client.consume("q", ttr=30)
    assert job is not None
    worker = Client(lmstfy_server.data_url, namespace, token, retries=0)
    timer = threading.Timer(0.5, lambda: worker.complete("q", job_id, result=b"late"))
    timer.start()
    started = time.monotonic()
    outcome = client.result("q", job_id, wait=10)
    timer.join()
    worker.close()
    assert outcome.ended and outcome.job.result == b"late"
    assert 0.4 <= time.monotonic() - started < 3.0


async def test_the_async_client_completes_and_waits_too(aclient: AsyncClient) -> None:
    assert await aclient.settings("q", keep=30) == Settings(keep=30, events=0)
    job_id = await aclient.publish("q", b"x")
    assert (await aclient.consume("q")) is not None
    waiter = asyncio.create_task(aclient.result("q", job_id, wait=10))
    await asyncio.sleep(0.2)
    await aclient.complete("q", job_id, result=b"\x00\xff")
    outcome = await waiter
    assert outcome.ended and outcome.job.result == b"\x00\xff"
    assert (await aclient.result("q", job_id)).job.state == "completed"
