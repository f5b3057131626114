"""The Worker completes a job with its handler's return value (SPEC 13), readable with `result`; a handler
returning None ACKs as before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import Client, Job
from lmstfy_py.worker import Worker
from tests.worker.conftest import drained, running, wait_until

RETURNED: dict[str, Any] = {
    "bytes": b"\x00raw\xff",
    "str": "héllo",
    "json": {"total": 42, "items": [1, 2]},
    "none": None,
}


def expected(returned: Any) -> bytes | None:
    if returned is None or isinstance(returned, bytes):
        return returned
    if isinstance(returned, str):
        return returned.encode()
    return json.dumps(returned, separators=(",", ":")).encode()


def handler_of(kind: str, returns: Callable[[Job], Any]) -> Callable[[Job], Any]:
    async def async_handler(job: Job) -> Any:
        await asyncio.sleep(0)
        return returns(job)

    return returns if kind == "sync" else async_handler


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_handlers_return_value_is_its_jobs_result(
    lmstfy_server: Server, namespace: str, token: str, client: Client, kind: str
) -> None:
    client.settings("q", keep=60)
    published = {client.publish("q", name): name for name in RETURNED}
    handler = handler_of(kind, lambda job: RETURNED[job.text()])
    worker = Worker(handler, url=lmstfy_server.data_url, token=token, namespace=namespace, queues="q", poll=1)
    with running(worker):
        wait_until(lambda: drained(client, "q"), what="all handled")
        for job_id, name in published.items():
            outcome = client.result("q", job_id, wait=5)
            assert outcome.ended and outcome.job.state == "completed", name
            # None: a plain ACK, batched as before: its record holds no result.
            assert outcome.job.result == expected(RETURNED[name]), name
    assert worker.tally.processed == len(RETURNED) and worker.tally.failed == 0


def test_a_return_value_json_cannot_encode_fails_the_job(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    job_id = client.publish("q", b"x", tries=1, keep=60)
    worker = Worker(
        lambda job: object(), url=lmstfy_server.data_url, token=token, namespace=namespace, queues="q", poll=1
    )
    with running(worker):
        wait_until(lambda: client.dead_letter_size("q") == 1, what="the job buried")
    assert worker.tally.failed == 1
    dead = client.peek_job("q", job_id)
    assert dead is not None and dead.state == "dead" and "TypeError" in (dead.last_error or "")
