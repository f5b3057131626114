"""The steps of a folder of Lua scripts as one Redis Function library (Redis >= 7; store/scripts.py
calls them by FCALL where the client does).

An EVAL runs its whole source at every call: for a step, the helpers of _lib.lua first (45 closures
made, 7-8 µs of Redis CPU), then the step (docs/PERFORMANCE.md, "Steps as Redis Functions"). A
function library runs its top level once, when Redis loads it: the helpers are made then, and a
call runs the step alone (1.6 µs for the call itself). One library holds every step of a folder,
so Redis keeps one copy of the helpers (a library per step took 1.3 MB of Redis memory; the
store's and the admin's libraries take 0.2 MB). It is named by the hash of what it holds: two
versions of lmstfy-py on one Redis (a rolling upgrade) each call their own, and an old version's
library stays until deleted (docs/MIGRATING.md says how).

A step's function takes KEYS and ARGV as an EVAL's body reads them, and starts with `per_call`:
what the helpers keep per step, which an EVAL makes afresh each time but a library would keep
between calls. Its flags say what it may do while Redis refuses writes (an EVAL is judged at its
first write instead; the flags replace that by a decision per step): a step whose header says
"(read only)" writes nothing and always runs (no-writes); a step that moves, ends or removes
jobs (DRAINS) runs when Redis is at maxmemory, so workers drain a full Redis (allow-oom: its
writes add a few bytes at most); every other step adds something (a job, a schedule, a setting,
a token, a waiter) and is refused whole then, before it writes anything.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Hashable, Mapping, Sequence
from importlib import resources

FUNCTION_PREFIX = "lmstfy_py_"
READ_ONLY_MARK = "(read only):"
DRAINS = frozenset(
    {
        "ack", "bury", "complete", "delete_dead", "delete_dead_one", "destroy", "forget_namespace",
        "limit_delete", "lmstfy_dead", "lmstfy_drop", "lmstfy_pump", "lmstfy_reserve", "promote", "pump",
        "purge_timer", "release", "reserve", "respawn", "respawn_one", "schedule_delete", "token_delete", "touch",
    }
)  # fmt: skip


class FunctionLibrary:
    """`steps` (name -> Lua body) registered as functions of one library, after `helpers`."""

    def __init__(self, helpers: str, steps: Mapping[str, str], per_call: str = "") -> None:
        self.helpers, self.steps, self.per_call = helpers, dict(steps), per_call
        held = "\0".join([helpers, per_call, *(f"{name}\0{body}" for name, body in sorted(self.steps.items()))])
        self.name = FUNCTION_PREFIX + hashlib.sha1(held.encode()).hexdigest()
        self.loading: dict[Hashable, asyncio.Future[None]] = {}  # the loads in flight (store/scripts.py)

    def function(self, step: str) -> str:
        return f"{self.name}_{step}"

    @functools.cached_property
    def text(self) -> str:
        """What FUNCTION LOAD takes."""
        registered = (
            f"redis.register_function{{function_name='{self.function(name)}', flags={{{flags(name, body)}}},"
            f" callback=function(KEYS, ARGV)\n{self.per_call}\n{body}\nend}}"
            for name, body in sorted(self.steps.items())
        )
        return "\n".join((f"#!lua name={self.name}", self.helpers, *registered))


def flags(name: str, body: str) -> str:
    """The function flags of step `name` (see the module's docstring), as Lua table items."""
    if READ_ONLY_MARK in body.split("\n", 1)[0]:
        return "'no-writes'"
    return "'allow-oom'" if name in DRAINS else ""


def folder_library(package: str, helpers: Sequence[str], per_call: str = "") -> FunctionLibrary:
    """The library of PACKAGE/lua/*.lua: the files named in `helpers` (in that order) at its top
    level, every other file a step named as the file."""
    folder = resources.files(package) / "lua"
    files = {
        entry.name.removesuffix(".lua"): entry.read_text() for entry in folder.iterdir() if entry.name.endswith(".lua")
    }
    steps = {name: body for name, body in files.items() if name not in helpers}
    return FunctionLibrary("\n".join(files[name] for name in helpers), steps, per_call)
