"""Millisecond timers on a real server: a bounded run of benchmarks/bench_timers.py.

Asserts what a user relies on (no job delivered before its delay, every job delivered);
the lateness figures it prints are measured by the script, not asserted here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_timers.py"


def test_delayed_jobs_are_never_early_and_all_arrive() -> None:
    args = ["--jobs", "300", "--min-delay", "0.3", "--max-delay", "1.5", "--idle-jobs", "640", "--idle-seconds", "1"]
    run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    found = re.search(r"precision: (\d+) jobs.*early: (\d+)", run.stdout)
    assert found, run.stdout
    assert found.groups() == ("300", "0")
