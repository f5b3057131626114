"""Every module of the package imports on its own, first: a circular import shows only when the
module that starts the cycle is the first one imported (a benchmark importing store/pipelined.py
first once found one the suite, importing the server first, never did)."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import lmstfy_py

CHECK = """
import importlib, sys
failed = []
roots, rest = sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]
for name in [*roots, *rest]:
    if name in roots:  # first, in a fresh state; the rest after whatever came before them
        for loaded in [m for m in sys.modules if m == "lmstfy_py" or m.startswith("lmstfy_py.")]:
            del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
"""


def test_every_module_imports_first() -> None:
    """test_no_import_cycle proves the imports the code spells (in functions too) form no cycle, so
    no module's import depends on what was imported before it but through what that graph cannot see
    (importlib, a module's __getattr__). Those start where a program does: each module nothing in the
    package imports is imported first, in a fresh state; every other module then imports at all."""
    names = [m.name for m in pkgutil.walk_packages(lmstfy_py.__path__, "lmstfy_py.")]
    graph = import_graph(Path(lmstfy_py.__file__).parent)
    imported = set().union(*graph.values())
    roots = [name for name in names if name not in imported]
    assert len(names) > 40 and "lmstfy_py.cli" in roots and "lmstfy_py.store.engine" not in roots
    run = subprocess.run(
        [sys.executable, "-c", CHECK, *roots, "--", *[n for n in names if n not in roots]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ""


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:`: imported for mypy only, never at run time."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def _imported(package: str, node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The package's modules one import statement runs (its parent packages aside: they run first)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    found = set()
    for target in wanted:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, imports inside functions included."""
    files: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skipped = _type_checking_only(tree)
        graph[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
                graph[name] |= _imported(package, node, set(files)) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first one repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        path.append(name)
        for target in sorted(graph[name]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name)
        if cycle:
            return cycle
    return None


def test_no_import_cycle() -> None:
    """A cycle imports only in one order: whoever imports the other module first finds it half-made."""
    graph = import_graph(Path(lmstfy_py.__file__).parent)
    assert len(graph) > 40
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


MAX_MODULE_LINES = 400


def test_no_module_is_longer_than_400_lines() -> None:
    """A module has one job: past 400 lines it has grown a second one."""
    root = Path(lmstfy_py.__file__).parent
    lengths = {path.relative_to(root).as_posix(): len(path.read_text().splitlines()) for path in root.rglob("*.py")}
    long = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    assert long == {}


def test_the_command_line_imports_no_redis_client_until_it_serves() -> None:
    """`lmstfy-py token ...`, `version` and `--help` start without redis-py (0.4-0.6 s of imports
    on this VM, paid by every token-cli command); `serve` imports it, OpenTelemetry kept out
    (redis_import.py), before any server module; hypercorn only when it serves with it (~0.2 s of
    every start before)."""
    check = (
        "import sys, lmstfy_py.cli, lmstfy_py.token_cli; before = 'redis' in sys.modules; import lmstfy_py.server; "
        "print(before, *(name in sys.modules for name in ('redis', 'opentelemetry', 'hypercorn')))"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.split() == ["False", "True", "False", "False"]
