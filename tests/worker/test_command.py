"""`lmstfy-py worker MODULE:CALLABLE` as a user runs it: a process, a handler module of its own,
SIGTERM in the middle of a batch, metrics on --metrics-port, and its exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lmstfy_py.client import Client
from lmstfy_py.worker.run import STOPPED_REASON
from tests.servers import Server, free_port
from tests.worker.conftest import wait_until

HANDLERS = """
import os, time
from pathlib import Path

EVENTS = Path(os.environ["EVENTS"])
SECONDS = {"fast": 0.0, "grace": 1.0, "slow": 60.0}


def note(line):
    with EVENTS.open("a") as events:
        events.write(line + "\\n")


def handle(job):
    kind = job.text().strip('"')  # a bulk publishes JSON values: "fast"
    note(f"start {kind} {job.id}")
    time.sleep(SECONDS[kind])
    note(f"end {kind} {job.id}")
"""


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    return tmp_path


def worker_process(server: Server, namespace: str, token: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "lmstfy_py.cli", "worker", *args, "--url", server.data_url]
    command += ["--namespace", namespace, "--queue", "q", "--poll", "1"]
    env = {**os.environ, "LMSTFY_TOKEN": token, "EVENTS": str(cwd / "events")}
    # The handler's module is found in the directory the worker runs in, as `python -m` would.
    return subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def events(cwd: Path) -> list[tuple[str, str, str]]:
    path = cwd / "events"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(what, kind, job_id) for what, kind, job_id in (line.split() for line in lines)]


def processed(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lmstfy_worker_jobs_processed_total" and sample.labels == {"queue": "q"}:
                return sample.value
    return 0.0


def test_sigterm_mid_batch_acks_what_finished_and_releases_the_rest_at_once(
    server: Server, namespace: str, token: str, client: Client, handlers: Path, stopped: list[subprocess.Popen[str]]
) -> None:
    fast = client.publish_many("q", ["fast"] * 4)
    grace = client.publish_many("q", ["grace"] * 2)
    slow = client.publish_many("q", ["slow"] * 2, tries=2)
    last_try = client.publish("q", b"slow")  # tries=1: no other worker may have it
    metrics_port = free_port()
    args = [
        "handlers:handle",
        "--concurrency",
        "16",
        "--ttr",
        "60",
        "--grace",
        "2",
        "--metrics-port",
        str(metrics_port),
    ]
    proc = worker_process(server, namespace, token, handlers, *args)
    stopped.append(proc)
    fast_done = ["end"] * 4 + ["start"] * 4
    wait_until(lambda: sorted(what for what, kind, _ in events(handlers) if kind == "fast") == fast_done)
    wait_until(lambda: [what for what, _, _ in events(handlers)].count("start") == 9)
    assert processed(metrics_port) >= 4
    proc.send_signal(signal.SIGTERM)  # the grace jobs run for a second more, the slow ones for a minute
    signalled = time.monotonic()
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - signalled < 2 + 1 + 2  # the grace, the long-poll in flight, slack
    ended = {job_id for what, _, job_id in events(handlers) if what == "end"}
    assert ended == set(fast) | set(grace)  # the grace jobs finished during the grace period
    for job_id in fast + grace:
        assert client.peek_job("q", job_id) is None  # ACKed
    for job_id in slow:  # released: ready for another worker now, not reserved until the ttr
        job = client.peek_job("q", job_id)
        assert job is not None and (job.state, job.last_error, job.remain_tries) == ("ready", STOPPED_REASON, 1)
    assert [(dead.id, dead.last_error) for dead in client.dead_jobs("q").jobs] == [(last_try, STOPPED_REASON)]
    assert client.stats("q").reserved == 0
    assert "did not finish within the grace period" in stderr and "stopping: no new jobs" in stderr


def test_a_handler_that_cannot_be_found_is_a_usage_error(
    server: Server, namespace: str, token: str, handlers: Path
) -> None:
    proc = worker_process(server, namespace, token, handlers, "handlers:nothing")
    _, stderr = proc.communicate(timeout=30)
    assert (proc.returncode, stderr.strip()) == (2, "lmstfy-py worker: error: handlers has no nothing")


def test_a_token_the_server_refuses_stops_the_worker_with_exit_code_1(
    server: Server, namespace: str, handlers: Path
) -> None:
    proc = worker_process(server, namespace, "not-a-token", handlers, "handlers:handle")
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert stderr.strip().endswith("lmstfy-py worker: error: 401 invalid token"), stderr
