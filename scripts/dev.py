#!/usr/bin/env python3
"""Bootstrap for a newcomer who has only Python 3.11+: one command to serve, test or lint.

    python3 scripts/dev.py serve [ARGS...]   # lmstfy-py serve ARGS
    python3 scripts/dev.py test [ARGS...]    # pytest ARGS (from the repo root); none: the whole suite,
                                             # in two processes, then the serial tests alone
    python3 scripts/dev.py lint              # ruff check + ruff format --check + mypy lmstfy_py

It creates `.venv` in the repo root when missing and (re)installs the project into it
whenever pyproject.toml changed (`serve` only what serving needs, `test` and `lint` the test
tools too; with uv where it installs, LMSTFY_INSTALLER=pip: with pip), then hands the process
over to the real command (exec), so exit codes and signals belong to that command. Standard
library only: it runs before any dependency exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".lmstfy-install-stamp"
# What each command needs: serving the runtime dependencies with the fast HTTP server (uvicorn,
# the default where installed); tests and lint their tools too.
SERVE_EXTRAS = ".[fast]"
TEST_EXTRAS = ".[test,fast,otel]"
NEEDS = {"serve": SERVE_EXTRAS, "test": TEST_EXTRAS, "lint": TEST_EXTRAS}
# Measured from a fresh clone with empty caches on the 2-core VM (README, "Which machine"):
# uv installed what serving needs in ~13 s, pip in ~28 s; with the test tools ~12 s and ~44 s.
SECONDS = {("uv", SERVE_EXTRAS): 15, ("pip", SERVE_EXTRAS): 30, ("uv", TEST_EXTRAS): 20, ("pip", TEST_EXTRAS): 60}
LINT_PATHS = ["lmstfy_py", "tests", "scripts", "benchmarks", "examples"]
USAGE = "usage: python3 scripts/dev.py {serve|test|lint} [ARGS...]"


def venv_bin(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / name


def pyproject_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_venv() -> None:
    if not venv_bin("python").exists():
        print(f"dev.py: creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)


def installed() -> tuple[str, str]:
    """(pyproject hash, extras) of the last install into .venv; empty strings when none."""
    words = STAMP.read_text().split() if STAMP.exists() else []
    return (words[0], words[1]) if len(words) == 2 else ("", "")


def ensure_installed(extras: str) -> None:
    wanted = pyproject_hash()
    done_hash, done_extras = installed()
    # The test extras include everything serving needs: a venv set up for tests serves as it is.
    if done_hash == wanted and extras in (done_extras, SERVE_EXTRAS):
        return
    installer = choose_installer()
    what = "what serving needs" if extras == SERVE_EXTRAS else "the server and its test tools"
    seconds = SECONDS[(installer[0], extras)]
    print(f"dev.py: installing {what} ({extras}) into .venv with {installer[0]}: ~{seconds} s", file=sys.stderr)
    started = time.monotonic()
    done = subprocess.run([*installer[1], "-e", extras], cwd=ROOT, check=False)
    if done.returncode != 0:
        sys.exit(f"dev.py: {installer[0]} install failed (exit {done.returncode}); its output is above")
    print(f"dev.py: installed in {time.monotonic() - started:.0f} s", file=sys.stderr)
    STAMP.write_text(f"{wanted} {extras}\n")


def choose_installer() -> tuple[str, list[str]]:
    """uv (from PyPI, into .venv) where it installs, else pip: uv installs the same set 2-4x faster
    here. LMSTFY_INSTALLER=pip keeps to pip."""
    pip = [str(venv_bin("python")), "-m", "pip", "install", "--disable-pip-version-check"]
    uv = venv_bin("uv")
    if os.environ.get("LMSTFY_INSTALLER") == "pip":
        return "pip", pip
    if not uv.exists():
        print("dev.py: installing uv into .venv (a fast installer, from PyPI)", file=sys.stderr)
        got = subprocess.run([*pip, "--quiet", "uv"], check=False, capture_output=True, text=True)
        if got.returncode != 0 or not uv.exists():
            said = (got.stderr.strip().splitlines() or ["nothing"])[-1]
            print(f"dev.py: uv did not install ({said}); using pip", file=sys.stderr)
            return "pip", pip
    return "uv", [str(uv), "pip", "install", "--python", str(venv_bin("python"))]


def ensure_browser() -> None:
    """The dashboard's browser tests drive Debian's Chromium: Playwright's own browser downloads
    are not reachable from every machine, a Debian package is."""
    if shutil.which("chromium"):
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        print(
            "dev.py: no chromium: the dashboard's browser tests will fail (apt-get install chromium)", file=sys.stderr
        )
        return
    print("dev.py: installing Debian's chromium for the dashboard's browser tests (apt-get, ~1 min)", file=sys.stderr)
    for step in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "chromium"]):
        if subprocess.run(step, stdout=subprocess.DEVNULL, check=False).returncode != 0:
            sys.exit(f"dev.py: apt-get {step[1]} failed; its output is above")


def rebase_path(arg: str, cwd: Path) -> str:
    """`arg` made absolute when it names a path under `cwd`, so it survives the chdir to the repo root."""
    path, sep, rest = arg.partition("::")  # pytest node ids: file.py::test_name
    if arg.startswith("-") or not (cwd / path).exists():
        return arg
    return str((cwd / path).resolve()) + sep + rest


def run_lint() -> int:
    """Every check, even after one failed, so one run shows every problem."""
    ruff, mypy = str(venv_bin("ruff")), str(venv_bin("mypy"))
    checks = [[ruff, "check", *LINT_PATHS], [ruff, "format", "--check", *LINT_PATHS], [mypy, "lmstfy_py"]]
    codes = [subprocess.run(check, cwd=ROOT, check=False).returncode for check in checks]
    return max(codes)


def main(argv: list[str]) -> int:
    # Newcomers run this with whatever python3 they have: say so plainly instead of failing later.
    if sys.version_info < (3, 11):  # noqa: UP036
        sys.exit(f"dev.py: Python 3.11+ is needed, this is {sys.version.split()[0]}")
    if not argv or argv[0] not in ("serve", "test", "lint"):
        sys.exit(USAGE)
    command, args = argv[0], argv[1:]
    ensure_venv()
    ensure_installed(NEEDS[command])
    if command == "serve":
        # Stay in the caller's directory: a relative --data-dir or config path means what they typed.
        exe = str(venv_bin("lmstfy-py"))
        os.execv(exe, [exe, "serve", *args])
    # pytest finds pyproject.toml (and testpaths) from the repo root, wherever we were called from.
    cwd = Path.cwd()
    os.chdir(ROOT)
    if command == "lint":
        return run_lint()
    ensure_browser()
    python = str(venv_bin("python"))
    if not args:
        return run_whole_suite(python)
    os.execv(python, [python, "-m", "pytest", *(rebase_path(arg, cwd) for arg in args)])
    return 0  # not reached: execv replaces this process


def run_whole_suite(python: str) -> int:
    """The whole suite: what only waits on real servers in two processes (a third made it no faster:
    it uses the 2-core VM's CPU), then the tests marked serial (deadlines, timings, the browser) apart
    from it, three modules at a time: they mostly wait (kills, restarts, ticks), so three of them
    share the machine without stretching each other's deadlines as the busy parallel part did (with
    three the part took 198 s and 127 % of the VM's 200 %, with two 329 s)."""
    parallel = subprocess.run([python, "-m", "pytest", "-n", "2", "-m", "not serial"], check=False)
    serial = subprocess.run([python, "-m", "pytest", "-n", "3", "--dist", "loadfile", "-m", "serial"], check=False)
    return parallel.returncode or serial.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
