"""Loads each lua/*.lua once and runs it as a Redis Function (FCALL), or by EVALSHA.

Every step is a function of its folder's library (store/function_library.py, Redis >= 7), whose
helpers Redis runs once, when it loads the library, rather than before every call as an EVAL's
(7-8 µs of Redis CPU a step, against 1.6 for the call itself). A client says whether it calls
functions (`functions`): the pipelined client and redis-py's standalone and Sentinel clients do
until their Redis refuses FCALL (Redis < 7, or an ACL without it), then use EVALSHA for good; a
cluster's does not (redis-py routes an FCALL by asking a node for its keys first, a round trip
more than the EVALSHA it routes itself).

Neither sends anything first: a function Redis does not know (after a restart without its data,
or FUNCTION FLUSH) is loaded when Redis answers "Function not found", a script when it answers
NOSCRIPT, and the call is made again, so a step stays one round trip. redis-py's own Script
objects send SCRIPT EXISTS before every pipeline.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from importlib import resources
from typing import Any, Generic, Protocol, TypeVar, get_origin, get_type_hints

from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError

from lmstfy_py import tasks
from lmstfy_py.store.function_library import FunctionLibrary, folder_library

log = logging.getLogger(__name__)

Arg = str | bytes | int | float
Command = Sequence[Arg]


class ScriptClient(Protocol):
    """What runs the script steps: a PipelinedRedis (store/pipelined.py), or redis-py's Redis or RedisCluster."""

    async def execute_command(self, *args: Any) -> Any: ...

    def pipeline(self, transaction: bool = ...) -> Any: ...

    def script_load(self, source: str, /) -> Awaitable[Any]: ...

    async def aclose(self) -> None: ...


def calls_functions(client: ScriptClient) -> bool:
    """Whether `client` calls the steps as functions (see the module's docstring); a client of
    redis-py's own classes (tests, benchmarks) does not."""
    return bool(getattr(client, "functions", False))


class Script:
    """One step, run by FCALL as a function of `library` or by EVALSHA as `source` (see the module's
    docstring); a script made alone (tests) is a library of its own."""

    def __init__(self, name: str, source: str, library: FunctionLibrary | None = None) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self.library = library or FunctionLibrary("", {name: source})
        self.function = self.library.function(name)

    async def __call__(self, client: ScriptClient, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        # execute_command, not client.fcall/evalsha: those wrappers inspect their arguments on every call.
        if calls_functions(client):
            try:
                return await client.execute_command("FCALL", self.function, len(keys), *keys, *args)
            except ResponseError as error:
                if _without_functions(str(error)):
                    _turn_to_evalsha(client, str(error))
                elif not missed(error):
                    raise
            if calls_functions(client) and await self._loaded(client):
                return await client.execute_command("FCALL", self.function, len(keys), *keys, *args)
        try:
            return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    def queue(self, pipe: Any, keys: Sequence[str], args: Sequence[Arg], functions: bool) -> None:
        """Adds this call to a pipeline (`functions`: as calls_functions(its client)); see run_pipeline."""
        # Not pipe.evalsha(): redis-py refuses that name in cluster pipelines; the raw command routes by its keys.
        if functions:
            pipe.execute_command("FCALL", self.function, len(keys), *keys, *args)
        else:
            pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    async def _loaded(self, client: ScriptClient) -> bool:
        """Loads this step's function; False when this call is to go by EVALSHA instead: Redis has no
        functions (the client turns to EVALSHA for good), or refuses writes for now (at maxmemory, or
        unable to persist: FUNCTION LOAD is a write, SCRIPT LOAD is not, and a step allowed then must run)."""
        try:
            # One load at a time per client, shared by the calls that missed it together: Redis
            # compiles the library at every load (a SCRIPT LOAD of a known script is a lookup), and
            # 2,000 long-polls arriving at once made 2,000 loads that held Redis for seconds.
            flight = (id(client), asyncio.get_running_loop())
            await tasks.shared(self.library.loading, flight, lambda: self._load(client))
        except ResponseError as refused:
            message = str(refused)
            if _without_functions(message):
                _turn_to_evalsha(client, message)
                return False
            if isinstance(refused, OutOfMemoryError) or "MISCONF" in message:
                return False
            raise
        return True

    async def _load(self, client: ScriptClient) -> None:
        await client.execute_command("FUNCTION", "LOAD", "REPLACE", self.library.text)


def missed(reply: Any) -> bool:
    """Whether a call answered `reply` did nothing because Redis did not know its script or
    function (or FCALL itself: the client then turns to EVALSHA); it is then made again."""
    if isinstance(reply, NoScriptError):
        return True
    message = str(reply) if isinstance(reply, ResponseError) else ""
    return "Function not found" in message or _without_functions(message)


def _without_functions(message: str) -> bool:
    """Whether Redis answered `message` because it has no functions or this user may not use them."""
    lowered = message.lower()  # "unknown command 'FCALL', ...", "NOPERM ... run the 'fcall' command"
    return ("unknown command" in lowered or "noperm" in lowered) and ("'fcall'" in lowered or "'function" in lowered)


def _turn_to_evalsha(client: ScriptClient, why: str) -> None:
    if calls_functions(client):
        log.info("redis refuses functions (%s): the steps run by EVALSHA", why.removeprefix("ERR ").split(",", 1)[0])
        client.functions = False  # type: ignore[attr-defined]  # our clients have it (calls_functions)


@functools.cache  # _lib.lua is read once, not once per step
def _read(name: str) -> str:
    return (resources.files("lmstfy_py.store") / "lua" / f"{name}.lua").read_text()


# What _lib.lua keeps per step (STEP, its cache of what one step read): new at every call.
LIB_PER_CALL = "STEP = {}"


@functools.cache
def _store_library() -> FunctionLibrary:
    return folder_library("lmstfy_py.store", ["_lib", "_lmstfy"], LIB_PER_CALL)


def load(name: str) -> Script:
    """lua/NAME.lua, after the helpers it uses."""
    # The scripts serving lmstfy's layout (lmstfy_*.lua) share helpers of their own.
    helpers = ["_lib", "_lmstfy"] if name.startswith("lmstfy_") else ["_lib"]
    library = _store_library()  # which read every step's file already
    return Script(name, "\n".join([*(_read(part) for part in helpers), library.steps[name]]), library)


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
    NOSCRIPT or "Function not found" did nothing, so it is safely run again alone, which loads it. `tail` holds
    index updates only (idempotent, re-derived by the pump's sweep within a second): once the
    scripts did their work, a failed tail command (Redis out of memory, say, which refuses a ZADD
    but not a consume) is logged, not raised, or the caller would be told a done step failed.
    """
    if len(calls) == 1 and not tail:
        # One command needs no pipeline: redis-py's Pipeline costs more CPU than the call itself.
        script, keys, args = calls[0]
        return [await script(client, keys, args)]
    pipe = client.pipeline(transaction=False)
    functions = calls_functions(client)
    for script, keys, args in calls:
        script.queue(pipe, keys, args, functions)
    for command in tail:
        pipe.execute_command(*command)
    results: list[Any] = await pipe.execute(raise_on_error=False)
    for i, (script, keys, args) in enumerate(calls):
        if missed(results[i]):
            results[i] = await script(client, keys, args)
        elif isinstance(results[i], Exception):
            raise results[i]
    for command, result in zip(tail, results[len(calls) :], strict=True):
        if isinstance(result, Exception):
            log.warning("%s after a job step failed (the pump's sweep repairs it): %s", command[0], result)
    return results
