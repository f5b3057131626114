"""At-least-once, crash-proof: SIGKILL the server under load five times and lose no job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "crash_test.py"


def test_no_job_is_lost_when_the_server_is_killed() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--kills", "5", "--interval", "1.0", "--drain-timeout", "40"],
        capture_output=True,
        text=True,
        timeout=100,
    )
    report = dict(line.split(":", 1) for line in run.stdout.splitlines() if ":" in line)
    assert run.returncode == 0, run.stdout + run.stderr
    assert report["server starts"].split()[0] == "6"
    assert int(report["published"]) > 100
    assert report["missing"].strip() == "0"
