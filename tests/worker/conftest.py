"""One real `lmstfy-py serve` for the module, a namespace, token and Client per test (tests/fixtures/module_server.py),
and `running(worker)`: a Worker on its own thread and event loop (as `Worker.run()` runs it),
stopped at the end."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from lmstfy_py.client import Client
from lmstfy_py.worker import Worker
from tests.fixtures.module_server import client, lmstfy_server, namespace, token

STOP_TIMEOUT = 30.0

__all__ = ["client", "lmstfy_server", "namespace", "token"]


@contextlib.contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Runs `worker` on a thread until the block ends; re-raises what the worker raised."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, name="worker")
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(STOP_TIMEOUT)
        assert not thread.is_alive(), "the worker did not stop"
    if failures:
        raise failures[0]


def wait_until(check: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not met within {timeout:g} s"
        time.sleep(0.02)


def drained(client: Client, *queues: str) -> bool:
    """Nothing ready, delayed or reserved: every job handled and ACKed (or buried)."""
    return all((stats.ready, stats.delayed, stats.reserved) == (0, 0, 0) for stats in (client.stats(q) for q in queues))


def reserved_and_ready(client: Client, queue: str) -> tuple[int, int]:
    """One stats call: the two counts seen at the same instant."""
    stats = client.stats(queue)
    return stats.reserved, stats.ready
