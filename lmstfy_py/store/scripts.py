"""Loads each lua/*.lua once and runs it by EVALSHA.

redis-py's own Script objects send SCRIPT EXISTS before every pipeline; ours
send EVALSHA straight away and load the script only when Redis answers
NOSCRIPT (after a restart or SCRIPT FLUSH), so a step stays one round trip.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from importlib import resources
from typing import Any, Generic, Protocol, TypeVar, get_origin, get_type_hints

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


def load(name: str) -> Script:
    """lua/NAME.lua, after the helpers it uses."""
    # The scripts serving lmstfy's layout (lmstfy_*.lua) share helpers of their own.
    libraries = ["_lib", "_lmstfy"] if name.startswith("lmstfy_") else ["_lib"]
    return Script(name, "\n".join(_read(part) for part in [*libraries, name]))


K = TypeVar("K", bound=tuple[Any, ...])
A = TypeVar("A", bound=tuple[Any, ...])
R = TypeVar("R")
T = TypeVar("T")
ScriptCall = tuple[Script, Sequence[str], Sequence[Arg]]


def _rest(fields: type[tuple[Any, ...]]) -> bool:
    """Whether the NamedTuple's last field is a tuple: the variadic rest of the KEYS or ARGV."""
    hints = list(get_type_hints(fields).values())
    return bool(hints) and get_origin(hints[-1]) is tuple


def _flat(values: tuple[Any, ...], rest: bool) -> tuple[Any, ...]:
    return values[:-1] + values[-1] if rest else values


class Step(Generic[K, A, R]):
    """A Lua script called through its contract (store/contracts/, admin/contracts.py): its KEYS and its ARGV as
    NamedTuples whose fields are in the script's order (a last field typed as a tuple holds the
    variadic rest), and the parser of its reply. The lua file's header names the same slots:
    tests/store/test_script_contracts.py holds the two together."""

    def __init__(self, script: Script, keys: type[K], args: type[A], parse: Callable[[Any], R]) -> None:
        self.script = script
        self.keys = keys
        self.args = args
        self.parse = parse
        # Read once here, not per call: the hot steps (publish, reserve, ack) run per request.
        self._keys_rest = _rest(keys)
        self._args_rest = _rest(args)

    def call(self, keys: K, args: A) -> ScriptCall:
        """The positional call, for run_pipeline; its reply goes through self.parse."""
        # _flat inlined: this runs per publish and per reserve.
        flat_keys = keys[:-1] + keys[-1] if self._keys_rest else keys
        return self.script, flat_keys, args[:-1] + args[-1] if self._args_rest else args

    async def __call__(self, client: ScriptClient, keys: K, args: A) -> R:
        flat_keys, flat_args = _flat(keys, self._keys_rest), _flat(args, self._args_rest)
        return self.parse(await self.script(client, flat_keys, flat_args))


def rows(make: Callable[[Iterable[Any]], T], width: int) -> Callable[[list[Any]], list[T]]:
    """The parser of a flat reply holding `width` fields per row."""
    return lambda flat: [make(flat[i : i + width]) for i in range(0, len(flat), width)]


def optional(make: Callable[[Iterable[Any]], T]) -> Callable[[list[Any] | None], T | None]:
    """The parser of a reply that is nil (None) when there is nothing to answer."""
    return lambda reply: make(reply) if reply else None


def store_step(name: str, keys: type[K], args: type[A], parse: Callable[[Any], R]) -> Step[K, A, R]:
    """The Step of lua/NAME.lua."""
    return Step(load(name), keys, args, parse)


async def run_pipeline(
    client: ScriptClient,
    calls: Sequence[ScriptCall],
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
