"""Loads each lua/*.lua once and runs it by EVALSHA.

redis-py's own Script objects send SCRIPT EXISTS before every pipeline; ours
send EVALSHA straight away and load the script only when Redis answers
NOSCRIPT (after a restart or SCRIPT FLUSH), so a step stays one round trip.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from redis.exceptions import NoScriptError

log = logging.getLogger(__name__)

Arg = str | bytes | int | float
Command = Sequence[Arg]


class ScriptClient(Protocol):
    """What runs the script steps: a PipelinedRedis (store/pipelined.py), or redis-py's Redis or RedisCluster."""

    async def execute_command(self, *args: Any) -> Any: ...

    def pipeline(self, transaction: bool = ...) -> Any: ...

    def script_load(self, source: str, /) -> Awaitable[Any]: ...

    async def aclose(self) -> None: ...


class Script:
    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, client: ScriptClient, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        # execute_command, not client.evalsha: that wrapper inspects its arguments on every call.
        try:
            return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    def queue(self, pipe: Any, keys: Sequence[str], args: Sequence[Arg]) -> None:
        """Adds this call to a pipeline; see run_pipeline for the NOSCRIPT case."""
        # Not pipe.evalsha(): redis-py refuses that name in cluster pipelines; the raw command routes by its keys.
        pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)


def _read(name: str) -> str:
    return (resources.files("lmstfy_py.store") / "lua" / f"{name}.lua").read_text()


def _load(name: str) -> Script:
    # The scripts serving lmstfy's layout (lmstfy_*.lua) share helpers of their own.
    libraries = ["_lib", "_lmstfy"] if name.startswith("lmstfy_") else ["_lib"]
    return Script(name, "\n".join(_read(part) for part in [*libraries, name]))


@dataclass(frozen=True)
class Scripts:
    """One attribute per lua/*.lua (but _lib.lua, which each of them starts with, and _lmstfy.lua)."""

    publish: Script
    reserve: Script
    pump: Script
    ack: Script
    release: Script
    touch: Script
    bury: Script
    peek: Script
    next_jobs: Script
    job_state: Script
    size: Script
    stats: Script
    pause: Script
    destroy: Script
    respawn: Script
    respawn_one: Script
    delete_dead: Script
    delete_dead_one: Script
    dead_page: Script
    purge_timer: Script
    forget_namespace: Script
    schedule_put: Script
    schedule_delete: Script
    schedule_fire: Script
    lmstfy_reserve: Script
    lmstfy_pump: Script
    lmstfy_dead: Script
    lmstfy_drop: Script

    @classmethod
    def load(cls) -> Scripts:
        return cls(**{name: _load(name) for name in cls.__dataclass_fields__})


async def run_pipeline(
    client: ScriptClient,
    calls: Sequence[tuple[Script, Sequence[str], Sequence[Arg]]],
    tail: Sequence[Command] = (),
) -> list[Any]:
    """Runs script calls, then the raw commands of `tail`, in one pipeline (one round trip).

    `client` is a redis-py client or a PipelinedRedis (store/pipelined.py). A call refused with
    NOSCRIPT did nothing, so it is safely run again alone, which loads its script. `tail` holds
    index updates only (idempotent, re-derived by the pump's sweep within a second): once the
    scripts did their work, a failed tail command (Redis out of memory, say, which refuses a ZADD
    but not a consume) is logged, not raised, or the caller would be told a done step failed.
    """
    if len(calls) == 1 and not tail:
        # One command needs no pipeline: redis-py's Pipeline costs more CPU than the call itself.
        script, keys, args = calls[0]
        return [await script(client, keys, args)]
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        script.queue(pipe, keys, args)
    for command in tail:
        pipe.execute_command(*command)
    results: list[Any] = await pipe.execute(raise_on_error=False)
    for i, (script, keys, args) in enumerate(calls):
        if isinstance(results[i], NoScriptError):
            results[i] = await script(client, keys, args)
        elif isinstance(results[i], Exception):
            raise results[i]
    for command, result in zip(tail, results[len(calls) :], strict=True):
        if isinstance(result, Exception):
            log.warning("%s after a job step failed (the pump's sweep repairs it): %s", command[0], result)
    return results
