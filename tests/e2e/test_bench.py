"""benchmarks/bench.py against a real `lmstfy-py serve`: it finds the server, runs, reports, cleans up."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server

ROOT = Path(__file__).resolve().parents[2]
# As a user starts them, from the checkout's root.
BENCH = [sys.executable, "-m", "benchmarks.bench"]
AB = [sys.executable, "-m", "benchmarks.ab"]
BENCH_TIMEOUT = 60


@pytest.fixture(params=["1"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Server]:
    with Server(tmp_path, args=["--workers", request.param]) as running:
        yield running.start()


def run_bench(server: Server, report: Path, *more: str) -> subprocess.CompletedProcess[str]:
    args = ["--url", server.data_url, "--admin", server.admin_url, "--duration", "0.4", "--clients", "4"]
    args += ["--scenarios", "publish,consume_ack", "--workers", "1", "--settle", "0", "--json", str(report), *more]
    return subprocess.run([*BENCH, *args], cwd=ROOT, capture_output=True, text=True, timeout=BENCH_TIMEOUT, check=False)


def test_bench_reports_every_scenario_and_ceiling_and_leaves_no_namespace(server: Server, tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    done = run_bench(server, report)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # It found the server by its port and the embedded Redis as its child, through its socket.
    assert server.proc is not None
    assert any(f"server={server.proc.pid}, redis={server.redis_pid}" in line for line in lines), done.stdout
    assert any(f"redis unix:{server.data_dir / 'redis.sock'}" in line for line in lines), done.stdout
    for name in ("publish", "consume_ack", "trivial-raw", "trivial-raw-put", "trivial-redis", "redis-benchmark"):
        assert any(line.startswith(name) for line in lines), done.stdout
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    assert results["publish"]["jobs"] > 0 and results["consume_ack"]["jobs"] > 0
    assert results["publish"]["ratios"]["req/trivial"] > 0
    assert results["publish"]["ratios"]["req/trivial-put"] > 0
    # Its namespaces are purged: nothing of the bench stays on the server.
    listed = httpx.get(f"{server.admin_url}/namespaces").json()["namespaces"]
    assert [n["namespace"] for n in listed if n["namespace"].startswith("bench-")] == [], listed


@pytest.mark.parametrize("server", ["2"], indirect=True)
def test_bench_finds_a_server_with_workers_as_their_supervisor(server: Server, tmp_path: Path) -> None:
    done = run_bench(server, tmp_path / "bench.json", "--scenarios", "publish", "--ceilings", "")
    assert done.returncode == 0, done.stderr
    assert server.proc is not None
    # Each worker listens on a socket of its own: the server is their parent, which holds none.
    assert f"server={server.proc.pid}, redis={server.redis_pid}" in done.stdout, done.stdout + done.stderr
    results = {r["name"]: r for r in json.loads((tmp_path / "bench.json").read_text())["results"]}
    assert results["publish"]["server_cpu_pct"] > 0


def test_e2e_ends_the_jobs_its_producers_publish_at_the_rate_asked(server: Server, tmp_path: Path) -> None:
    """The issue's e2e shape, 1 producer and 4 long-polling consumers here, paced at 50 publishes a second."""
    report = tmp_path / "bench.json"
    more = ["--scenarios", "e2e", "--duration", "1", "--e2e-rate", "50", "--ceilings", ""]
    done = run_bench(server, report, *more)
    assert done.returncode == 0, done.stderr
    [e2e] = json.loads(report.read_text())["results"]
    assert 30 <= e2e["extra"]["published_per_s"] <= 55, e2e  # paced, not flat out (a loaded machine lags)
    assert e2e["jobs"] >= e2e["extra"]["published_per_s"] * e2e["seconds"] - 5, e2e  # ended as they came


def test_ab_compares_two_servers_round_by_round(server: Server) -> None:
    """One server as A and B, B publishing with a priority: the table of medians and ratios B/A."""
    sides = ["--a", server.data_url, server.admin_url, "--b", server.data_url, server.admin_url]
    args = [*sides, "--b-query", "priority=5", "--rounds", "2", "--duration", "0.5", "--clients", "2", "--settle", "0"]
    done = subprocess.run([*AB, *args], cwd=ROOT, capture_output=True, text=True, timeout=BENCH_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ab: round") == 4  # two rounds, A and B each
    table, paired = done.stdout.splitlines()[-6:-3], done.stdout.splitlines()[-3:]
    rates = ["A", "req/s", "B", "req/s", "B/A", "A", "jobs/s", "B", "jobs/s", "B/A"]
    assert table[0].split() == ["scenario", *rates, "A", "CPU", "µs/req", "B", "CPU", "µs/req", "B/A"]
    for row, scenario in zip(table[1:], ("publish", "consume_ack"), strict=True):
        name, *figures = row.split()
        assert name == scenario and len(figures) == 9 and all(float(f.replace(",", "")) > 0 for f in figures), row
    assert_paired(paired, "B/A", 2)


def assert_paired(rows: list[str], ratio: str, rounds: int) -> None:
    """Each round's own ratio of both sides and their median, per scenario: what a drifting machine does not bias."""
    assert rows[0] == f"paired, each round's {ratio} and their median:"
    each = ", ".join([r"[\d.]+"] * rounds)
    for row, scenario in zip(rows[1:], ("publish", "consume_ack"), strict=True):
        line = rf"  {scenario} +req/s {each} \(median [\d.]+\); CPU µs/req {each} \(median [\d.]+\)"
        if scenario == "consume_ack":  # two requests a job: CPU per job ended too, both sides' medians first
            line += rf"; CPU µs/job \([\d,]+ / [\d,]+\) {each} \(median [\d.]+\)"
        assert re.fullmatch(line, row), row


def test_ab_compares_a_queue_setting_events_on_vs_off(server: Server) -> None:
    """--b-settings events=100000: B's scenario queues record their events (SPEC 13), seen in the rounds' lines."""
    sides = ["--a", server.data_url, server.admin_url, "--b", server.data_url, server.admin_url]
    args = [*sides, "--b-settings", "events=100000", "--rounds", "1", "--duration", "0.5", "--clients", "2"]
    done = subprocess.run(
        [*AB, *args, "--settle", "0"], cwd=ROOT, capture_output=True, text=True, timeout=BENCH_TIMEOUT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "{'events': '100000'}" in next(
        line for line in done.stdout.splitlines() if line.startswith("ab: round 1/1, B")
    )
    assert [row.split()[0] for row in done.stdout.splitlines()[-2:]] == ["publish", "consume_ack"]


def test_compare_runs_both_servers_alternately_and_prints_ours_over_theirs(server: Server) -> None:
    """--compare with the same server as "theirs" (a Go lmstfy in real use): rounds alternate, ratios ~1."""
    args = ["--url", server.data_url, "--admin", server.admin_url, "--compare", server.data_url, server.admin_url]
    args += ["--scenarios", "publish,consume_ack", "--rounds", "2", "--duration", "0.5", "--clients", "2"]
    done = subprocess.run(
        [*BENCH, *args, "--settle", "0"], cwd=ROOT, capture_output=True, text=True, timeout=BENCH_TIMEOUT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rounds = [line.split(",")[1].split()[0] for line in done.stdout.splitlines() if line.startswith("compare: round")]
    assert rounds == ["ours", "theirs", "theirs", "ours"]  # who goes first alternates
    table, paired = done.stdout.splitlines()[-6:-3], done.stdout.splitlines()[-3:]
    header = ["scenario", "ours", "req/s", "theirs", "req/s", "ours/theirs", "ours", "jobs/s", "theirs", "jobs/s"]
    cpu = ["ours", "CPU", "µs/req", "theirs", "CPU", "µs/req", "ours/theirs"]
    assert table[0].split() == [*header, "ours/theirs", *cpu]
    for row, scenario in zip(table[1:], ("publish", "consume_ack"), strict=True):
        name, *figures = row.split()
        assert len(figures) == 9, row
        assert name == scenario and all(float(f.replace(",", "")) > 0 for f in figures), row
    assert_paired(paired, "ours/theirs", 2)
