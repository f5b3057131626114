"""Every module of the package imports on its own, first: a circular import shows only when the
module that starts the cycle is the first one imported (a benchmark importing store/pipelined.py
first once found one the suite, importing the server first, never did)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import lmstfy_py

CHECK = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "lmstfy_py" or m.startswith("lmstfy_py.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
"""


def test_every_module_imports_first() -> None:
    names = [m.name for m in pkgutil.walk_packages(lmstfy_py.__path__, "lmstfy_py.")]
    assert len(names) > 40
    run = subprocess.run([sys.executable, "-c", CHECK, *names], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ""
