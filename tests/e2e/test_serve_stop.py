"""What `lmstfy-py serve` says when it is stopped: a line as the stop begins, one once it is over.

An operator who sends SIGTERM (systemd, kill, Ctrl-C) sees the server take it and finish, in
the log format the server is configured with, on stderr: once per server, however many workers.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from benchmarks.harness.lmstfy_servers import Server

STOP_TIMEOUT = 15.0


def stopped_by(server: Server, sig: signal.Signals) -> str:
    server.signal(sig)
    try:
        code = server.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:  # what the server said so far tells where it hangs
        pytest.fail(f"not stopped within {STOP_TIMEOUT:g} s of {sig.name}:\n{server.stderr()}")
    assert code == 0, server.stderr()
    return server.stderr()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_sigterm_is_announced_and_so_is_the_end(tmp_path: Path, redis_url: str, workers: str) -> None:
    with Server(tmp_path, redis_url=redis_url, args=["--workers", workers]) as server:
        server.start()
        err = stopped_by(server, signal.SIGTERM)
    said = [line for line in err.splitlines() if line.startswith("lmstfy-py: ")]
    assert said[-2].startswith("lmstfy-py: SIGTERM received: stopping"), err
    assert said[-1] == "lmstfy-py: stopped", err
    assert err.count("SIGTERM received") == 1, err  # the server's, not each worker's


def test_a_sigint_is_named_and_lmstfys_json_log_format_is_kept(tmp_path: Path, redis_url: str) -> None:
    config = tmp_path / "lmstfy.toml"
    config.write_text('[log]\nformat = "json"\nlevel = "info"\n')
    with Server(tmp_path, redis_url=redis_url, config=config, args=["--workers", "2"]) as server:
        server.start()
        err = stopped_by(server, signal.SIGINT)
    entries = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    messages = [entry["msg"] for entry in entries if entry["level"] == "info"]
    assert messages[-2].startswith("lmstfy-py: SIGINT received: stopping"), err
    assert messages[-1] == "lmstfy-py: stopped", err
    assert not [line for line in err.splitlines() if line.startswith("lmstfy-py: ")], err  # logged, not printed


@pytest.mark.parametrize(("args", "expected"), [([], "uvicorn"), (["--http-server", "hypercorn"], "hypercorn")])
def test_serve_runs_uvicorn_unless_told_otherwise(
    tmp_path: Path, redis_url: str, args: list[str], expected: str
) -> None:
    """The set-up installs the [fast] extra (dev.py serve, as the tests' set-up): a newcomer gets the fast server."""
    with Server(tmp_path, redis_url=redis_url, args=["--workers", "1", *args]) as server:
        server.start()
        err = stopped_by(server, signal.SIGTERM)
    (started,) = [line for line in err.splitlines() if line.startswith("lmstfy-py 0")]
    assert started.endswith(f"1 worker ({expected})"), err
