"""Engines on a real standalone Redis and on real Redis Clusters (one node, three masters).

Every engine test runs on each: a script that touched two hash slots would
fail on a cluster with CROSSSLOT.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import Event


@pytest.fixture
async def engine(pool_config: PoolConfig) -> AsyncIterator[Engine]:
    engine = pools.engine("default", pool_config)
    yield engine
    await engine.close()


@pytest.fixture
async def pump(engine: Engine) -> AsyncIterator[Pump]:
    pump = Pump(engine)
    pump.start()
    yield pump
    await pump.stop()


async def events_kept(store: JobStore, ns: str, queue: str, idle_s: float = 0.2) -> list[dict[str, Any]]:
    """The events a queue's log keeps, oldest first: its event stream read from the start until it idles."""
    found: list[dict[str, Any]] = []
    async for item in await store.open_events(ns, [queue], "0", idle_s=idle_s):
        if item is None:
            break
        if isinstance(item, Event):
            found.append(json.loads(item.data))
    return found
