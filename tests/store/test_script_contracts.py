"""Each Lua script's contract (lmstfy_py/store/contracts, lmstfy_py/admin/contracts.py) against its header.

The header of a .lua file names its slots, `KEYS[n] description` (or `KEYS[a..b]` for a few in a
row, `KEYS[a..]` for the variadic rest), at the start of a comment line or after two spaces or
", "; a description goes on over the following comment lines that start in lower case. The
contract's NamedTuples must have one field per slot, in order, a last field typed as a tuple
exactly when the header ends with an open range, and each word of a field's name must be in the
description of its slot: the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, get_origin, get_type_hints

import pytest

from lmstfy_py.admin import contracts as admin_contracts
from lmstfy_py.store import contracts
from lmstfy_py.store.scripts import Step

SLOT = re.compile(r"(?:^|  |, |; )(KEYS|ARGV)\[(\d+)(?:\.\.([0-9]*)[^\]]*)?\]:?")


class Slot(NamedTuple):
    first: int
    last: int | None  # None: the variadic rest
    text: str


def header(source: str) -> list[str]:
    lines = []
    for line in source.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return lines


def slots(source: str, kind: str) -> list[Slot]:
    found: list[list[Any]] = []
    current: list[Any] | None = None
    for line in header(source):
        tokens = list(SLOT.finditer(line))
        if not tokens:
            if current is not None and line[:1].islower():
                current[3] += " " + line
            else:
                current = None
            continue
        if current is not None and tokens[0].start() > 0:
            current[3] += " " + line[: tokens[0].start()]
        for i, token in enumerate(tokens):
            end = tokens[i + 1].start() if i + 1 < len(tokens) else len(line)
            entry = [token.group(1), int(token.group(2)), token.group(3), line[token.end() : end]]
            found.append(entry)
            current = entry
    result = []
    for k, first, last, text in found:
        if k == kind:
            result.append(Slot(first, None if last == "" else int(last or first), text))
    return result


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def check(fields: type[tuple[Any, ...]], found: list[Slot], what: str) -> None:
    names = list(get_type_hints(fields))
    variadic = bool(names) and get_origin(get_type_hints(fields)[names[-1]]) is tuple
    fixed = [s for s in found if s.last is not None]
    rest = [s for s in found if s.last is None]
    assert len(rest) <= 1 and (not rest or found[-1] is rest[0]), f"{what}: one open range, last"
    positions = [p for s in fixed for p in range(s.first, (s.last or 0) + 1)]
    assert positions == list(range(1, len(positions) + 1)), f"{what}: slots {positions} are not 1..n in order"
    assert variadic == bool(rest), f"{what}: a variadic last field iff the header ends with an open range"
    assert len(names) - variadic == len(positions), f"{what}: fields {names}, header slots {positions}"
    for i, name in enumerate(names):
        slot = (
            rest[0] if variadic and i == len(names) - 1 else next(s for s in fixed if s.first <= i + 1 <= (s.last or 0))
        )
        missing = set(name.split("_")) - words(slot.text)
        assert not missing, f"{what}: field {name!r} has {missing} not in its slot's header {slot.text!r}"


STORE_LUA = sorted(
    p.name[:-4] for p in (resources.files("lmstfy_py.store") / "lua").iterdir() if not p.name.startswith("_")
)
ADMIN_LUA = sorted(p.name[:-4] for p in (resources.files("lmstfy_py.admin") / "lua").iterdir())


def lua(name: str) -> str:
    """The .lua file itself (a store script's Script.source starts with the libraries it uses)."""
    package, _, script = name.rpartition("/")
    return (resources.files(f"lmstfy_py.{package or 'store'}") / "lua" / f"{script}.lua").read_text()


def steps() -> dict[str, object]:
    store = {name: getattr(contracts.Scripts, name) for name in STORE_LUA}
    admin = {f"admin/{name}": getattr(admin_contracts, name.upper()) for name in ADMIN_LUA}
    return store | admin


@pytest.mark.parametrize("name", sorted(steps()))
def test_each_contract_matches_its_lua_header(name: str) -> None:
    step = steps()[name]
    assert isinstance(step, Step), f"{name} is called without a contract"
    assert step.script.name == name.removeprefix("admin/")
    check(step.keys, slots(lua(name), "KEYS"), f"{name} KEYS")
    check(step.args, slots(lua(name), "ARGV"), f"{name} ARGV")


def test_the_header_parser() -> None:
    source = "-- KEYS[1] timer zset  KEYS[2..3] ready list, priority\n-- set  KEYS[4..] job hashes\n-- Job keys are\n"
    assert slots(source, "KEYS") == [
        Slot(1, 1, " timer zset"),
        Slot(2, 3, " ready list, priority set"),
        Slot(4, None, " job hashes"),
    ]


def test_scripts_are_run_only_through_their_contracts() -> None:
    """A Script is built only where its Step is declared, and no reply is taken apart by position:
    the Step's parser names its fields (a call site indexing a reply would bypass the contract)."""
    package = Path(str(resources.files("lmstfy_py")))
    declaring = {package / "store" / "scripts.py", package / "admin" / "contracts.py"}
    for path in package.rglob("*.py"):
        text = path.read_text()
        if path not in declaring:
            assert not re.search(r"\bScript\(", text), f"{path} builds a Script outside a contract"
        assert not re.search(r"await [\w.]*(scripts\.\w+|[A-Z_]{3,})\([^()]*\)\)?\[", text), f"{path} indexes a reply"
