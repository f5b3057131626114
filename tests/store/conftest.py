"""Engines on a real standalone Redis and on real Redis Clusters (one node, three masters).

Every engine test runs on each: a script that touched two hash slots would
fail on a cluster with CROSSSLOT.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lmstfy_py.config import PoolConfig
from lmstfy_py.store import pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.pump import Pump


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
