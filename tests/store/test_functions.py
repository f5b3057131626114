"""The steps as Redis Functions (store/scripts.py): each step's library loaded when Redis does not
know it, every step run by EVALSHA on a Redis without functions, and what a step may do while
Redis refuses writes, decided per step by its function's flags."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.admin.contracts import _admin_library
from lmstfy_py.config import PoolConfig
from lmstfy_py.store import function_library, pools
from lmstfy_py.store.contracts import Scripts
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.scripts import Step
from lmstfy_py.types import NewJob

NS, Q = "fn", "q"


def calls(server: RedisProcess, command: str) -> int:
    with server.client() as conn:
        return int(conn.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


async def life_cycle(engine: Engine) -> None:
    """A publish, a pipelined publish of two, a consume of three and their ACKs: every path of a step."""
    await engine.publish(NS, Q, NewJob(b"one"))
    await engine.publish_many(NS, Q, [NewJob(b"two"), NewJob(b"three")])
    jobs = await engine.consume(NS, [Q], 60_000, 0, 10)
    assert sorted(job.body for job in jobs) == [b"one", b"three", b"two"]
    assert await engine.ack_many(NS, Q, [job.job_id for job in jobs]) == 3
    assert await engine.size(NS, Q) == 0


@pytest.mark.parametrize("without", ["renamed away", "denied by its ACL"])
async def test_every_step_runs_by_evalsha_on_a_redis_without_functions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, without: str
) -> None:
    """Redis < 7 (here a Redis whose FCALL and FUNCTION are renamed away), or a user its ACL denies them."""
    renamed = ["--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""] if without == "renamed away" else []
    server = RedisProcess(tmp_path / "redis", extra_args=renamed)
    server.start()
    url = server.url
    if without == "denied by its ACL":
        with server.client() as conn:
            conn.execute_command("ACL", "SETUSER", "steps", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-function")
        url = url.replace("redis://", "redis://steps:pw@")
    engine = pools.engine("default", PoolConfig("default", url=url))
    try:
        with caplog.at_level(logging.INFO, logger="lmstfy_py.store.scripts"):
            await life_cycle(engine)
            await life_cycle(engine)
        assert calls(server, "evalsha") >= 8 and calls(server, "fcall") <= 1
        said = [record.getMessage() for record in caplog.records]
        assert len(said) == 1 and said[0].endswith("): the steps run by EVALSHA"), said
        assert "'FCALL'" in said[0] or "'fcall'" in said[0]
    finally:
        await engine.close()
        server.stop()


async def test_a_step_s_function_is_loaded_again_after_a_flush(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path / "redis")
    server.start()
    engine = pools.engine("default", PoolConfig("default", url=server.url))
    try:
        for _ in range(2):
            with server.client() as conn:
                conn.function_flush()
            await life_cycle(engine)
        assert calls(server, "evalsha") == 0 and calls(server, "fcall") >= 8
        with server.client() as conn:
            names = {entry[1].decode() for entry in conn.function_list()}
        assert len(names) == 1 and names.pop().startswith(function_library.FUNCTION_PREFIX)  # every step's
    finally:
        await engine.close()
        server.stop()


def test_each_step_s_flags_follow_what_it_does() -> None:
    """A "(read only)" step runs whatever Redis refuses (no-writes); a step that drains runs at
    maxmemory (allow-oom); one that adds is refused whole then."""
    steps = {name: step.script for name, step in vars(Scripts).items() if isinstance(step, Step)}
    flags = {name: function_library.flags(name, script.library.steps[name]) for name, script in steps.items()}
    assert flags["size"] == flags["peek"] == flags["stats"] == "'no-writes'"
    assert flags["reserve"] == flags["ack"] == flags["pump"] == "'allow-oom'"
    assert flags["publish"] == ""
    # Every name DRAINS lists is a step (a misspelt one would leave its step refused when Redis is full).
    admin_steps = _admin_library().steps
    assert {"token_delete", "limit_delete"} <= admin_steps.keys()
    assert not function_library.DRAINS - flags.keys() - admin_steps.keys()


async def test_calls_that_miss_the_function_together_load_it_once(tmp_path: Path) -> None:
    """Redis compiles a library at every load: 2,000 long-polls that missed it at once made 2,000
    loads, which held Redis past the other requests' timeouts."""
    server = RedisProcess(tmp_path / "redis")
    server.start()
    engine = pools.engine("default", PoolConfig("default", url=server.url))
    try:
        await engine.publish(NS, Q, NewJob(b"warm"))  # the connection made
        with server.client() as conn:
            conn.function_flush()
            conn.config_resetstat()
        sizes = await asyncio.gather(*(engine.size(NS, Q) for _ in range(200)))
        assert sizes == [1] * 200
        assert calls(server, "function|load") == 1
    finally:
        await engine.close()
        server.stop()
