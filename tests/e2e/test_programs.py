"""Every program in benchmarks/, scripts/ and examples/ runs: started as a user starts it, in a tiny configuration.

What they print is checked for the lines a reader looks for, not for the figures: those are
asserted by test_crash, test_timers and test_long_polls (through the same measuring code), and
read by a human from a full run. A program run by another test is named in RUN_BY with it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE
from typing import Any

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 90.0
PIPES: dict[str, Any] = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": RUN_TIMEOUT}
# Modules the programs import, not programs themselves.
LIBRARIES = {"benchmarks/__init__.py", "benchmarks/loadclient.py", "benchmarks/flow_limits.py"}
# Programs run as modules: they import the checkout's packages (benchmarks.harness, ...).
AS_MODULES = ("benchmarks/", "scripts/dashboard_screenshots.py")
# Every program, and the test that runs it.
RUN_BY = {
    "benchmarks/bench.py": "tests/e2e/test_bench.py::test_bench_reports_every_scenario_and_ceiling_and_leaves_no_namespace",  # noqa: E501
    "benchmarks/ab.py": "tests/e2e/test_bench.py::test_ab_compares_two_servers_round_by_round",
    "benchmarks/bench_app.py": "tests/e2e/test_programs.py::test_bench_app",
    "benchmarks/bench_http_servers.py": "tests/e2e/test_programs.py::test_bench_http_servers",
    "benchmarks/bench_longpolls.py": "tests/e2e/test_programs.py::test_bench_longpolls",
    "benchmarks/bench_event_streams.py": "tests/e2e/test_programs.py::test_bench_event_streams",
    "benchmarks/bench_cron.py": "tests/e2e/test_programs.py::test_bench_cron",
    "benchmarks/bench_flow.py": "tests/e2e/test_programs.py::test_bench_flow",
    "benchmarks/bench_scopes.py": "tests/e2e/test_programs.py::test_bench_scopes",
    "benchmarks/bench_tracing.py": "tests/e2e/test_programs.py::test_bench_tracing",
    "benchmarks/bench_push.py": "tests/e2e/test_programs.py::test_bench_push",
    "benchmarks/bench_redis_client.py": "tests/e2e/test_programs.py::test_bench_redis_client",
    "benchmarks/publish_path.py": "tests/e2e/test_programs.py::test_publish_path",
    "benchmarks/bench_memory.py": "tests/e2e/test_programs.py::test_bench_memory",
    "benchmarks/bench_step_cost.py": "tests/e2e/test_programs.py::test_bench_step_cost",
    "benchmarks/bench_result_waits.py": "tests/e2e/test_programs.py::test_bench_result_waits",
    "benchmarks/bench_results.py": "tests/e2e/test_programs.py::test_bench_results",
    "benchmarks/bench_request_paths.py": "tests/e2e/test_programs.py::test_bench_request_paths",
    "benchmarks/bench_timers.py": "tests/e2e/test_programs.py::test_bench_timers",
    "benchmarks/bench_timer_handover.py": "tests/e2e/test_programs.py::test_bench_timer_handover",
    "benchmarks/timer_stages.py": "tests/e2e/test_programs.py::test_timer_stages",
    "benchmarks/bench_worker.py": "tests/e2e/test_programs.py::test_bench_worker",
    "benchmarks/bench_client_consume.py": "tests/e2e/test_programs.py::test_bench_client_consume",
    "benchmarks/crash_test.py": "tests/e2e/test_programs.py::test_crash_test",
    "benchmarks/redis_kill_loss.py": "tests/e2e/test_programs.py::test_redis_kill_loss",
    "benchmarks/trivial_app.py": "tests/e2e/test_programs.py::test_trivial_app",
    "scripts/dashboard_screenshots.py": "tests/e2e/test_programs.py::test_dashboard_screenshots",
    "scripts/dev.py": "tests/e2e/test_programs.py::test_dev_py",
    "examples/publish.py": "tests/e2e/test_programs.py::test_examples",
    "examples/worker.py": "tests/e2e/test_programs.py::test_examples",
    "scripts/token-cli": "tests/token_cli/test_token_cli.py::test_scripts_token_cli_runs_the_same_commands",
}


def command(program: str) -> list[str]:
    """How a user starts `program` from the checkout's root: the benchmarks and the scripts that import
    them as modules (`python -m benchmarks.bench`), the others by their path."""
    if program.startswith(AS_MODULES):
        return [sys.executable, "-m", program.removesuffix(".py").replace("/", ".")]
    return [sys.executable, str(ROOT / program)]


def run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command(program), *args], **PIPES)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_every_program_is_run_by_a_test() -> None:
    found = [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("examples/*.py")]
    programs = {str(path.relative_to(ROOT)) for path in found if path.is_file()}
    assert programs - LIBRARIES == set(RUN_BY)
    for program, test in RUN_BY.items():
        path, name = test.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), f"{program}: {test} is gone"


# -- benchmarks ------------------------------------------------------------------------------------


def test_redis_kill_loss(tmp_path: Path) -> None:
    args = ["--fsync", "always", "--kills", "2", "--clients", "2", "--dir", str(tmp_path)]
    out = ok(run("benchmarks/redis_kill_loss.py", *args))
    assert re.search(r"fsync always: 2 kills, [\d,]+ acknowledged writes, 0 lost", out), out


def test_bench_app(redis_url: str) -> None:
    out = ok(
        run("benchmarks/bench_app.py", "--redis-url", redis_url, "--callers", "4", "--requests", "40", "--rounds", "1")
    )
    for route in ("publish", "consume + ACK (per request)", "GET size (no token check)", "404 (no route)"):
        assert re.search(rf"{re.escape(route)} +[\d.]+ µs CPU per request", out), out


def test_bench_redis_client(redis_url: str) -> None:
    args = ["--redis-url", redis_url, "--callers", "4", "--commands", "40", "--rounds", "1"]
    out = ok(run("benchmarks/bench_redis_client.py", *args))
    for client in ("redis-py pooled client", "lmstfy-py pipelined"):
        assert re.search(rf"{client} +[\d,]+ calls/s +[\d.]+ µs CPU per call", out), out
    assert "EVALSHA + ZADD pipeline:" in out, out


@pytest.mark.parametrize("delay", ["0", "5"])
def test_publish_path(redis_url: str, delay: str) -> None:
    out = ok(run("benchmarks/publish_path.py", "--redis-url", redis_url, "--delay", delay))
    before = re.search(r"^(\d+) before the step is written: (.*)$", out, re.MULTILINE)
    assert before, out
    files = before.group(2).split(", ")
    assert len(files) == int(before.group(1)) and files[-1] == "store/pipelined.py", out
    assert {"store/engine.py", "store/scripts.py"} <= set(files), out
    # docs/ARCHITECTURE.md's life of a publish: one file per job on the way; a ninth is a change to say there.
    assert len(files) <= 8, out
    stack = r"^\d+ on the stack when it is: web/.* -> store/engine\.py -> store/scripts\.py -> store/pipelined\.py$"
    assert re.search(stack, out, re.MULTILINE), out


def test_bench_memory() -> None:
    out = ok(run("benchmarks/bench_memory.py", "--jobs", "2000", "--cpu-jobs", "2000"))
    per_job = re.search(r"^bytes per job \(used_memory\): ([\d.]+)$", out, re.MULTILINE)
    assert per_job and 100 < float(per_job.group(1)) < 2000, out
    assert "encoding {'listpack': " in out, out  # a small job's hash stays compact
    assert re.search(r"per job reserved [\d.]+, ACKed [\d.]+", out), out


def test_bench_step_cost() -> None:
    out = ok(run("benchmarks/bench_step_cost.py", "smoke", "--jobs", "300", "--publishers", "2"))
    assert re.search(r"^smoke: publish [\d.]+ µs/call.*, consume\+ACK [\d.]+ µs/call", out, re.MULTILINE), out
    assert re.search(r"^smoke: end to end, 2 publishing [\d.]+ µs/call, .* Redis process [\d.]+ µs/job", out, re.M), out


def test_bench_result_waits() -> None:
    out = ok(run("benchmarks/bench_result_waits.py", "--waiters", "30", "--rounds", "1", "--records", "300"))
    assert re.search(r"^round 1: 30 waiters, .* p99 [\d.]+ ms", out, re.MULTILINE), out
    record = re.search(r"^memory of 300 100-byte jobs: (\d+) bytes per completed record", out, re.MULTILINE)
    assert record and 100 < int(record.group(1)) < 2000, out


def test_bench_results() -> None:
    # Over HTTP: every waiter must be answered 200 with its job's result (exit 1 otherwise).
    out = ok(run("benchmarks/bench_results.py", "--jobs", "30", "--batch", "10", "--rounds", "1"))
    assert "round 1: 30/30 waiters answered with their end" in out, out


def test_bench_request_paths() -> None:
    args = ["--rounds", "1", "--duration", "0.3", "--clients", "2", "--requests", "40", "--in-process-rounds", "1"]
    out = ok(run("benchmarks/bench_request_paths.py", *args))
    compared = re.findall(r"^answers of (\w+) vs (\w+): (.*)$", out, re.MULTILINE)
    assert compared and all(verdict == "identical" for _, _, verdict in compared), out
    for scenario in ("publish", "consume_ack"):
        assert re.search(rf"^\| {scenario} \| \w+ \| [\d,]+ \|", out, re.MULTILINE), out
    assert re.search(r"^  publish +app +[\d.]+ µs +÷ starlette [\d.]+", out, re.MULTILINE), out


def test_bench_http_servers() -> None:
    # uvicorn and granian come from a scratch venv (pip, from PyPI) that the suite does not build:
    # with the project's interpreter as --python only hypercorn, the reference, is measured.
    args = ["--python", sys.executable, "--rounds", "1", "--duration", "0.3", "--clients", "2", "--workers", "1"]
    out = ok(run("benchmarks/bench_http_servers.py", *args))
    assert re.search(r"^  hypercorn +[\d,]+ req/s ", out, re.MULTILINE), out
    assert "medians" in out


def test_bench_longpolls() -> None:
    out = ok(run("benchmarks/bench_longpolls.py", "--waiters", "20", "--timeout", "10"))
    assert "jobs delivered:       20 (20 distinct)" in out, out
    assert "final stop exit code: 0" in out


def test_bench_event_streams() -> None:
    args = ["--streams", "20", "--rounds", "1", "--duration", "0.5", "--clients", "2", "--settle", "0.1"]
    out = ok(run("benchmarks/bench_event_streams.py", *args))
    assert re.search(r"   20 streams: +[\d,]+ publishes/s, CPU +[\d,]+ µs/publish", out), out
    assert re.search(r"ratio with/without: rate [\d.]+, CPU per publish [\d.]+", out), out


def test_bench_push() -> None:
    args = ["--jobs", "200", "--rounds", "1", "--idle-groups", "3", "--idle-seconds", "0.2", "--settle", "0.1"]
    out = ok(run("benchmarks/bench_push.py", *args))
    assert re.search(r"round 1: [\d,]+ deliveries/s \(200 in [\d.]+ s\); CPU per delivery: server \d+ us", out), out
    assert re.search(r"idle: server [\d.]+% of a core without push groups, [\d.]+% with 3 idle groups", out), out


def test_bench_scopes() -> None:
    args = ["--rounds", "1", "--duration", "0.2", "--clients", "2", "--settle", "0", "--check-calls", "1000"]
    out = ok(run("benchmarks/bench_scopes.py", *args))
    assert re.search(r"^grant check per request: unrestricted \d+ ns, scoped, queue seen before \d+ ns", out, re.M), out
    for scenario in ("publish", "consume_ack"):
        assert re.search(rf"^{scenario}: median .* server CPU .* µs/req: ratio [\d.]+", out, re.M), out


def test_bench_tracing() -> None:
    args = ["--rounds", "1", "--duration", "0.2", "--clients", "2", "--settle", "0"]
    out = ok(run("benchmarks/bench_tracing.py", *args))
    for case in ("export/sampled publish", "export/unsampled consume+ACK", "dead/sampled publish"):
        assert re.search(rf"^  {re.escape(case)} +req/s [\d.]+  cpu [\d.]+  p99 [\d.]+$", out, re.M), out
    assert re.search(r"^dead collector: lmstfy_otlp_spans_dropped_total [\d,]+$", out, re.M), out
    spans = re.search(r"^receiver: ([\d,]+) spans decoded$", out, re.M)
    assert spans and int(spans.group(1).replace(",", "")) > 0, out  # the sampled cases' spans arrived


def test_bench_flow() -> None:
    # Exit 1 would mean a limit or the fairness bound broken; the lines are what a reader looks for.
    args = ["--groups", "20", "--per-group", "3", "--rounds", "1", "--settle", "0", "--workers", "1"]
    args += ["--fair-jobs", "300", "--trials", "2", "--fair-skip", "5"]
    args += ["--consumers", "8", "--limit-seconds", "1", "--max-reserved", "3", "--rate", "20", "--burst", "3"]
    out = ok(run("benchmarks/bench_flow.py", *args))
    assert re.search(
        r"^  groups: 60 jobs in [\d.]+ s: [\d,]+ jobs/s, .* after the last ACK \([-+\d,]+ B\)", out, re.M
    ), out
    assert re.search(r"^groups: median [\d,]+ jobs/s with groups, [\d,]+ without: ratio [\d.]+", out, re.M), out
    assert re.search(r"^fairness: worst [12] over 2 trials", out, re.M), out
    assert re.search(r"^max_reserved=3, 8 consumers, hold 20 ms: .*: held$", out, re.M), out
    assert re.search(r"^rate=20/s burst=3, 8 consumers: .* \(held\)$", out, re.M), out


def test_bench_timers() -> None:
    args = ["--jobs", "20", "--min-delay", "0.1", "--max-delay", "0.3", "--consumers", "4", "--publishers", "4"]
    out = ok(
        run(
            "benchmarks/bench_timers.py",
            *args,
            "--idle-jobs",
            "64",
            "--idle-seconds",
            "0.2",
            "--http-server",
            "uvicorn",
        )
    )
    assert "precision: 20 of 20 jobs delivered (0 twice)" in out and "early: 0" in out, out
    assert "idle: 64 future jobs: server " in out


def test_bench_cron() -> None:
    out = ok(run("benchmarks/bench_cron.py", "--schedules", "5", "--seconds", "2.5", "--rounds", "1"))
    assert re.search(r"round 1 \S+: fired \d+ of 1[0-5] ticks; late p50 \d+ ms, p99 \d+ ms", out), out
    assert re.search(r"== \S+: median fired [01]\.\d+ of the ticks, late p50 \d+ ms, p99 \d+ ms, CPU", out), out


def test_bench_timer_handover() -> None:
    out = ok(run("benchmarks/bench_timer_handover.py", "--pairs", "1", "--jobs", "5", "--consumers", "2"))
    assert re.search(r"== idle \S+: median p50 [0-9.]+ ms, p99 [0-9.]+ ms, early \d+", out), out
    assert re.search(r"== load \S+: median p50 [0-9.]+ ms, p99 [0-9.]+ ms, early \d+", out), out


def test_timer_stages() -> None:
    out = ok(run("benchmarks/timer_stages.py", "--pairs", "1", "--jobs", "5", "--consumers", "2"))
    late = r'"late": \[[0-9.]+, [0-9.]+\]'
    for load in ("idle", "load"):
        assert re.search(rf"== {load} \S+: p50/p99 medians \{{{late}.*\}}, other cores ", out), out


def test_bench_worker() -> None:
    args = ["--jobs", "300", "--rounds", "1", "--clients", "4", "--settle", "0", "--server-workers", "1"]
    # One handler kind (the sync one runs the same rounds): each run is a worker process's start.
    args += ["--handlers", "async-5ms", "--prefetch", "default", "--http-server", "uvicorn"]
    args += ["--ack-with-consume", "on,off", "--raw-carriers", "2"]
    out = ok(run("benchmarks/bench_worker.py", *args))
    for when in ("opening", "closing"):
        line = r"^round 1: consume100_batch +300 jobs in [\d.]+ s: +[\d,]+ jobs/s .* bench \d+% other \d+%"
        line += rf"  \d+ µs cpu/job  \({when}\)$"
        assert re.search(line, out, re.MULTILINE), out
    for handler in ("async-5ms", "async-5ms-batchack"):
        line = rf"^round 1: worker-{handler} +300 jobs in [\d.]+ s: +[\d,]+ jobs/s .* worker \d+% other \d+%"
        line += r"  \d+ µs cpu/job$"
        assert re.search(line, out, re.MULTILINE), out
        line = rf"^round 1: worker-{handler} +requests: consumes [\d,]+ \(mean [\d.]+ ms\), batch ACKs [\d,]+ "
        assert re.search(line, out, re.MULTILINE), out
        line = rf"^round 1: worker-{handler} +÷ consume100_batch \(mean of both\) [\d.]+$"
        assert re.search(line, out, re.MULTILINE), out
        line = rf"^  worker-{handler} +[\d,]+ jobs/s  worker ÷ consume100_batch [\d.]+ \(rounds: [\d.]+\)$"
        assert re.search(line, out, re.MULTILINE), out
    # The worker's pattern with no client library and no handler, drained as the workers were.
    line = r"^round 1: raw-carriers +300 jobs in [\d.]+ s: +[\d,]+ jobs/s .* bench \d+% other \d+%  \d+ µs cpu/job$"
    assert re.search(line, out, re.MULTILINE), out
    assert re.search(r"^round 1: raw-carriers +requests: consumes [\d,]+ ", out, re.MULTILINE), out
    assert re.search(r"^  raw-carriers +[\d,]+ jobs/s  worker ÷ consume100_batch [\d.]+ \(rounds", out, re.MULTILINE)
    assert "server stop exit code: 0" in out


def test_bench_client_consume() -> None:
    out = ok(run("benchmarks/bench_client_consume.py", "--jobs", "300", "--rounds", "2"))
    line = r"^round (\d): (client|raw) +cpu +[\d.]+ µs/job, +[\d.]+ ms/consume; wall +[\d.]+ ms/consume$"
    runs = re.findall(line, out, re.MULTILINE)
    assert runs == [("1", "client"), ("1", "raw"), ("2", "raw"), ("2", "client")], out  # who goes first alternates
    assert re.search(r"^client ÷ raw, CPU per job: [\d.]+ \(rounds: [\d.]+, [\d.]+\)$", out, re.MULTILINE), out


def test_crash_test() -> None:
    out = ok(run("benchmarks/crash_test.py", "--kills", "1", "--interval", "0.3", "--drain-timeout", "20"))
    assert "server starts:        2 (1 SIGKILLs)" in out, out
    assert "missing:              0" in out


@pytest.fixture
def trivial_app(request: pytest.FixtureRequest, redis_url: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    app, workers, http_server = request.param
    port = free_port()
    args = ["--port", str(port), "--app", app, "--workers", str(workers), "--redis-url", redis_url]
    args += ["--http-server", http_server]
    proc = subprocess.Popen([*command("benchmarks/trivial_app.py"), *args], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        yield port, proc
    finally:
        proc.kill()
        proc.communicate()


# bench.py (test_bench) serves the raw and redis apps with one worker under hypercorn; these are the others.
@pytest.mark.parametrize(
    "trivial_app", [("starlette", 2, "hypercorn"), ("redis-py", 1, "hypercorn"), ("raw", 2, "uvicorn")], indirect=True
)
def test_trivial_app(trivial_app: tuple[int, subprocess.Popen[str]], request: pytest.FixtureRequest) -> None:
    port, proc = trivial_app
    http_server = request.node.callspec.params["trivial_app"][2]

    def answers() -> bool:
        try:
            return httpx.put(f"http://127.0.0.1:{port}/api/x/q", content=b"body").status_code == 200
        except httpx.TransportError:
            return proc.poll() is not None  # exited: stop waiting, the asserts below say why

    assert wait_until(answers, 15) and proc.poll() is None
    response = httpx.get(f"http://127.0.0.1:{port}/anything")
    assert (response.status_code, response.json()) == (200, {"msg": "ok"})
    proc.terminate()
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert f"({http_server})" in stderr  # served by the HTTP server asked for


# -- scripts ---------------------------------------------------------------------------------------


def test_dashboard_screenshots(tmp_path: Path) -> None:
    out = ok(run("scripts/dashboard_screenshots.py", "--out", str(tmp_path)))
    for page in ("overview", "queue", "deadletter", "pushers", "cron", "tokens"):
        for size, width in (("wide", 1280), ("phone", 390)):
            shot = tmp_path / f"{page}-{size}.png"
            assert str(shot) in out
            header = shot.read_bytes()[:24]
            assert header[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(header[16:20], "big") == width


def test_dev_py() -> None:
    usage = run("scripts/dev.py")
    assert (usage.returncode, usage.stderr) == (1, "usage: python3 scripts/dev.py {serve|test|lint} [ARGS...]\n")
    # With .venv in place (this suite runs from it) it execs the real command, which answers.
    assert ok(run("scripts/dev.py", "serve", "--help")).startswith("Usage: lmstfy-py serve [OPTIONS]")


# -- examples --------------------------------------------------------------------------------------


def env_token(env: dict[str, str]) -> dict[str, str]:
    return {"X-Token": env["LMSTFY_TOKEN"]}


def test_examples(tmp_path: Path) -> None:
    """publish.py publishes orders, worker.py closes them and stops on SIGTERM."""
    with Server(tmp_path) as server:
        server.start()
        env = {**os.environ, "LMSTFY_URL": server.data_url, "LMSTFY_TOKEN": create_token(server, "demo")}
        first = subprocess.run([sys.executable, "examples/publish.py", "3"], env=env, **PIPES)
        assert first.returncode == 0 and first.stdout.endswith("orders: 3 ready\n"), first.stdout + first.stderr
        worker = subprocess.Popen(
            [sys.executable, "examples/worker.py"], env=env, cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True
        )
        try:
            stats = f"{server.data_url}/api/demo/orders/stats"
            drained = {"ready": 0, "reserved": 0}
            assert wait_until(lambda: drained.items() <= httpx.get(stats, headers=env_token(env)).json().items(), 15)
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=15)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
        assert worker.returncode == 0, err
        assert sorted(line.split(" (")[0] for line in out.splitlines()) == [f"closed order {n}" for n in (1, 2, 3)]
        assert "worker stopped: 3 processed, 0 failed, 0 given back" in err
