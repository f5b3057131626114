"""What the push hardening tests share: a real `lmstfy-py serve` process (its config file written
in the test's tmp dir), a push group created through its admin API, jobs published and looked up
through its data API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.harness.lmstfy_servers import Server, create_token

NS = "push-hard"


@contextmanager
def served(tmp_path: Path, http_server: str, config: str = "") -> Iterator[Server]:
    """One server on its embedded Redis; `config` the text of its TOML file, when given."""
    path = None
    if config:
        path = tmp_path / "lmstfy.toml"
        path.write_text(config)
    with Server(tmp_path, config=path, http_server=http_server) as server:
        yield server.start()


def create_pusher(server: Server, group: str, endpoint: str, queue: str, **more: Any) -> None:
    body = {"queues": [queue], "endpoint": endpoint, "workers": 2, "timeout": 5, **more}
    answer = httpx.post(f"{server.admin_url}/pusher/{NS}/{group}", json=body, timeout=10)
    assert answer.status_code == 201, answer.text


def publish(server: Server, token: str, queue: str, data: bytes = b"job") -> str:
    answer = httpx.put(f"{server.data_url}/api/{NS}/{queue}", params={"token": token}, content=data, timeout=10)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["job_id"]
    return job_id


def job_state(server: Server, token: str, queue: str, job_id: str) -> httpx.Response:
    return httpx.get(f"{server.data_url}/api/{NS}/{queue}/job/{job_id}", params={"token": token}, timeout=10)


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


def dead(server: Server, token: str, queue: str, job_id: str, timeout: float = 15) -> dict[str, Any]:
    """The job's state once it is in the dead letter."""
    found: dict[str, Any] = {}

    def is_dead() -> bool:
        answer = job_state(server, token, queue, job_id)
        assert answer.status_code == 200, f"job {job_id} of {queue}: {answer.text} (delivered and ACKed?)"
        found.update(answer.json())
        return bool(found["state"] == "dead")

    eventually(is_dead, timeout, f"job {job_id} of {queue} dead")
    return found


__all__ = ["NS", "create_pusher", "create_token", "dead", "eventually", "job_state", "publish", "served"]
