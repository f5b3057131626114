#!/usr/bin/env python3
"""Bootstrap for a newcomer who has only Python 3.11+: one command to serve, test or lint.

    python3 scripts/dev.py serve [ARGS...]   # lmstfy-py serve ARGS
    python3 scripts/dev.py test [ARGS...]    # pytest ARGS (from the repo root); none: the whole suite,
                                             # in two processes, then the serial tests alone
    python3 scripts/dev.py lint              # ruff check + ruff format --check + mypy lmstfy_py

It creates `.venv` in the repo root when missing and (re)installs the project into it
whenever pyproject.toml changed, then hands the process over to the real command (exec), so
exit codes and signals belong to that command. Standard library only: it runs before any
dependency exists.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".lmstfy-install-stamp"
EXTRAS = ".[test,fast]"
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


def ensure_installed() -> None:
    wanted = pyproject_hash()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        return
    print(f"dev.py: installing {EXTRAS} into .venv (pyproject.toml changed or first run)", file=sys.stderr)
    cmd = [str(venv_bin("python")), "-m", "pip", "install", "--quiet", "-e", EXTRAS]
    # Quiet on success, everything on failure: the captured output is the only useful clue then.
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        sys.exit(f"dev.py: pip install failed (exit {done.returncode})")
    STAMP.write_text(wanted + "\n")


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
    ensure_installed()
    if command == "serve":
        # Stay in the caller's directory: a relative --data-dir or config path means what they typed.
        exe = str(venv_bin("lmstfy-py"))
        os.execv(exe, [exe, "serve", *args])
    # pytest finds pyproject.toml (and testpaths) from the repo root, wherever we were called from.
    cwd = Path.cwd()
    os.chdir(ROOT)
    if command == "lint":
        return run_lint()
    python = str(venv_bin("python"))
    if not args:
        return run_whole_suite(python)
    os.execv(python, [python, "-m", "pytest", *(rebase_path(arg, cwd) for arg in args)])
    return 0  # not reached: execv replaces this process


def run_whole_suite(python: str) -> int:
    """The whole suite: what only waits on real servers in two processes, then the tests marked
    serial (deadlines, timings, the browser) alone, so that no other test shares the machine with them."""
    parallel = subprocess.run([python, "-m", "pytest", "-n", "2", "-m", "not serial"], check=False)
    serial = subprocess.run([python, "-m", "pytest", "-m", "serial"], check=False)
    return parallel.returncode or serial.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
