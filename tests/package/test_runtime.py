"""The Runtime's life on a real Redis: every part it starts is stopped, in the reverse order of the
starts (the pools, which every other part uses, close last), and nothing of it keeps running."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from lmstfy_py import metrics
from lmstfy_py.admin.limits import LimitStore
from lmstfy_py.admin.pushers import PusherStore
from lmstfy_py.admin.rates import RateStore
from lmstfy_py.admin.switches import Switch
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.push.manager import PushManager
from lmstfy_py.runtime import Runtime
from lmstfy_py.store.due_index import DueIndexLoop
from lmstfy_py.store.health import Health
from lmstfy_py.store.pools import Pools

# Every kind of part the Runtime starts and stops (Pump and Scheduler are DueIndexLoops).
PARTS: list[type[Any]] = [
    LimitStore,
    Switch,
    PushManager,
    RateStore,
    PusherStore,
    metrics.Collector,
    metrics.Flusher,
    Health,
    DueIndexLoop,
]
Events = list[tuple[str, object]]


def recorded(method: Callable[..., Any], what: str, events: Events) -> Callable[..., Any]:
    """`method`, noting (what, the part) in `events` before it runs."""
    if inspect.iscoroutinefunction(method):

        async def noted_async(part: object, *args: Any) -> Any:
            events.append((what, part))
            return await method(part, *args)

        return noted_async

    def noted(part: object, *args: Any) -> Any:
        events.append((what, part))
        return method(part, *args)

    return noted


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    noted: Events = []
    for kind in PARTS:
        monkeypatch.setattr(kind, "start", recorded(kind.start, "start", noted))
        monkeypatch.setattr(kind, "stop", recorded(kind.stop, "stop", noted))
    connect = Pools.connect

    def connected(*args: Any, **kwargs: Any) -> Pools:
        pools = connect(*args, **kwargs)
        noted.append(("start", pools))
        return pools

    monkeypatch.setattr(Pools, "connect", connected)
    monkeypatch.setattr(Pools, "close", recorded(Pools.close, "stop", noted))
    return noted


@pytest.mark.parametrize("run_pumps", [True, False])
async def test_parts_stop_in_the_reverse_order_of_their_start(redis_url: str, events: Events, run_pumps: bool) -> None:
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    async with Runtime.running(config, run_pumps=run_pumps) as runtime:
        started = [part for what, part in events if what == "start"]
        assert not [part for what, part in events if what == "stop"]
    stopped = [part for what, part in events if what == "stop"]
    assert stopped == started[::-1]
    assert started[0] is runtime.pools
    kinds = {type(part).__name__ for part in started}
    if run_pumps:
        assert {"Pump", "Scheduler", "Health", "Collector", "Flusher", "PushManager", "PusherStore"} <= kinds
    else:
        assert kinds == {"Pools", "LimitStore", "Switch"}


async def test_no_task_of_the_runtime_outlives_it(redis_url: str) -> None:
    before = asyncio.all_tasks()
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    async with Runtime.running(config) as runtime:
        engine = runtime.pools.get("default")
        # A long-poll starts the wake loop of its queue.
        await engine.consume("ns", ["idle"], ttr_ms=1000, timeout_ms=100, count=1)
        assert len(asyncio.all_tasks() - before) > 1  # its loops run
    left = [task for task in asyncio.all_tasks() - before if not task.done()]
    assert left == []


async def test_a_start_that_fails_half_way_stops_what_it_started(
    redis_url: str, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(part: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(PusherStore, "start", broken)  # the last part to start
    config = Config(pools={"default": PoolConfig("default", url=redis_url)})
    before = asyncio.all_tasks()
    with pytest.raises(RuntimeError, match="injected"):
        await Runtime.start(config)
    started = [part for what, part in events if what == "start"]
    assert [part for what, part in events if what == "stop"] == started[::-1]
    assert len(started) > 3  # the pools, limits, switch and some loops
    assert [task for task in asyncio.all_tasks() - before if not task.done()] == []
