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

from benchmarks.harness.lmstfy_servers import Server, free_port
from lmstfy_py.client import Client
from lmstfy_py.worker.run import STOPPED_REASON
from tests.worker.conftest import drained, wait_until

Stopped = list[subprocess.Popen[str]]  # worker processes the `stopped` fixture kills at the end

HANDLERS = """
import os, time
from pathlib import Path

from lmstfy_py.worker import Bury

EVENTS = Path(os.environ["EVENTS"])
SECONDS = {"fast": 0.0, "grace": 1.0, "slow": 60.0, "fail": 0.0, "bury": 0.0}


def note(line):
    with EVENTS.open("a") as events:
        events.write(line + "\\n")


def handle(job):
    kind = job.text().strip('"')  # a bulk publishes JSON values: "fast"
    note(f"start {kind} {job.id}")
    time.sleep(SECONDS[kind])
    note(f"end {kind} {job.id}")
    if kind == "fail":
        raise RuntimeError("failed on purpose")
    if kind == "bury":
        raise Bury("buried on purpose")
"""


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    return tmp_path


def worker_process(lmstfy_server: Server, namespace: str, token: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "lmstfy_py.cli", "worker", *args, "--url", lmstfy_server.data_url]
    command += ["--namespace", namespace, "--queue", "q", "--poll", "1"]
    env = {**os.environ, "LMSTFY_TOKEN": token, "EVENTS": str(cwd / "events")}
    # The handler's module is found in the directory the worker runs in, as `python -m` would.
    return subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def stopped() -> Iterator[Stopped]:
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


def scraped(metrics_port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample the worker serves, by name and labels."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def processed(metrics_port: int) -> float:
    return scraped(metrics_port).get(("lmstfy_worker_jobs_processed_total", (("queue", "q"),)), 0.0)


def test_sigterm_mid_batch_acks_what_finished_and_releases_the_rest_at_once(
    lmstfy_server: Server, namespace: str, token: str, client: Client, handlers: Path, stopped: Stopped
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
    proc = worker_process(lmstfy_server, namespace, token, handlers, *args)
    stopped.append(proc)
    fast_done = ["end"] * 4 + ["start"] * 4
    wait_until(lambda: sorted(what for what, kind, _ in events(handlers) if kind == "fast") == fast_done)
    wait_until(lambda: [what for what, _, _ in events(handlers)].count("start") == 9)
    wait_until(lambda: processed(metrics_port) >= 4)  # counted just after the handler returns: after its "end"
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)  # the grace jobs run for a second more, the slow ones for a minute
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    # The slow handlers had their whole grace (2 s), no more: then their jobs went back.
    assert 2 <= time.monotonic() - signalled < 2 + 1 + 2  # the grace, the long-poll in flight, slack
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


def test_metrics_count_processed_and_failed_jobs_and_time_them(
    lmstfy_server: Server, namespace: str, token: str, client: Client, handlers: Path, stopped: Stopped
) -> None:
    client.publish_many("q", ["fast"] * 4 + ["grace"])  # grace: a handler of one second
    failing = client.publish_many("q", ["fail"] * 2, tries=2)  # released, then buried by the next release
    client.publish_many("q", ["bury"])
    metrics_port = free_port()
    proc = worker_process(
        lmstfy_server, namespace, token, handlers, "handlers:handle", "--metrics-port", str(metrics_port)
    )
    stopped.append(proc)
    wait_until(lambda: client.dead_letter_size("q") == 3 and drained(client, "q"), what="every job settled")
    samples = scraped(metrics_port)
    q = (("queue", "q"),)
    assert samples[("lmstfy_worker_jobs_processed_total", q)] == 5
    assert samples[("lmstfy_worker_jobs_failed_total", (("action", "release"), ("queue", "q")))] == 4
    assert samples[("lmstfy_worker_jobs_failed_total", (("action", "bury"), ("queue", "q")))] == 1
    assert samples[("lmstfy_worker_job_duration_seconds_count", q)] == 5 + 4 + 1  # every handler, whatever its end
    assert samples[("lmstfy_worker_job_duration_seconds_sum", q)] >= 1.0  # in seconds: the one-second handler
    assert samples[("lmstfy_worker_job_duration_seconds_bucket", (("le", "0.5"), ("queue", "q")))] <= 9
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    assert {dead.id for dead in client.dead_jobs("q").jobs} >= set(failing)
    assert stderr.count("RuntimeError: failed on purpose") == 4  # one line per failure, with the job id
    assert all(stderr.count(job_id) == 2 for job_id in failing)


def test_debug_logs_are_the_workers_not_one_per_http_request(
    lmstfy_server: Server, namespace: str, token: str, client: Client, handlers: Path, stopped: Stopped
) -> None:
    client.publish_many("q", ["fast"] * 3)
    proc = worker_process(lmstfy_server, namespace, token, handlers, "handlers:handle", "--log-level", "debug")
    stopped.append(proc)
    wait_until(lambda: drained(client, "q"), what="every job handled")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "worker stopped: 3 processed" in stderr, stderr
    assert "httpcore" not in stderr  # its ~10 DEBUG lines per request would bury the worker's own


def test_sigterm_gives_back_the_prefetched_jobs_untried(
    lmstfy_server: Server, namespace: str, token: str, client: Client, handlers: Path, stopped: Stopped
) -> None:
    slow = client.publish_many("q", ["slow"] * 6)  # one try each
    args = ["handlers:handle", "--concurrency", "2", "--prefetch", "2", "--grace", "0"]
    proc = worker_process(lmstfy_server, namespace, token, handlers, *args)
    stopped.append(proc)
    wait_until(lambda: len(events(handlers)) == 2 and client.stats("q").reserved == 4, what="2 running, 2 held")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    ran = {job_id for _, _, job_id in events(handlers)}
    assert sorted(dead.id for dead in client.dead_jobs("q").jobs) == sorted(ran)  # their only try was used
    rest = [client.peek_job("q", job_id) for job_id in slow if job_id not in ran]
    assert [(j.state, j.remain_tries, j.attempts) for j in rest if j] == [("ready", 1, 0)] * 4
    assert "giving back 2 job(s) whose handlers had not started" in stderr


def test_a_handler_that_cannot_be_found_is_a_usage_error(
    lmstfy_server: Server, namespace: str, token: str, handlers: Path
) -> None:
    proc = worker_process(lmstfy_server, namespace, token, handlers, "handlers:nothing")
    _, stderr = proc.communicate(timeout=30)
    assert (proc.returncode, stderr.strip()) == (2, "lmstfy-py worker: error: handlers has no nothing")


def test_a_token_the_server_refuses_stops_the_worker_with_exit_code_1(
    lmstfy_server: Server, namespace: str, handlers: Path
) -> None:
    proc = worker_process(lmstfy_server, namespace, "not-a-token", handlers, "handlers:handle")
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert stderr.strip().endswith("lmstfy-py worker: error: 401 invalid token"), stderr


def test_help_names_the_handler_as_its_usage_line_does() -> None:
    """One name for the one argument: the usage line's MODULE:CALLABLE, in the text and the command list too."""
    command = [sys.executable, "-m", "lmstfy_py.cli"]
    shown = subprocess.run([*command, "worker", "--help"], capture_output=True, text=True, timeout=30, check=True)
    assert "worker [OPTIONS] MODULE:CALLABLE\n" in shown.stdout  # the usage line
    assert "Run MODULE:CALLABLE (" in " ".join(shown.stdout.split())
    listed = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=30, check=True)
    assert "HANDLER" not in shown.stdout and "HANDLER" not in listed.stdout
