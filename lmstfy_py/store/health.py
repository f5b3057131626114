"""Whether a pool's Redis answers, as this process sees it.

A health check PINGs its pool every PROBE_EVERY_S and says so in the log once per change, down
or back up, per pool and process: request failures and background loops stay quiet about
outages (an outage used to log a line per failed request, thousands a minute). When the pool
stops answering, the long-polls waiting on it are answered 503 at once: a worker must learn
that the storage is away, not hear "no job available" when its timeout ends. GET /ready on the
admin port probes every pool afresh.
"""

from __future__ import annotations

import asyncio
import logging

from lmstfy_py import tasks
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.faults import outage_reason

log = logging.getLogger(__name__)

PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 1.0  # a frozen Redis is noticed within PROBE_EVERY_S + PROBE_TIMEOUT_S


async def probe(engine: Engine) -> Exception | None:
    """None when the pool's Redis answers PING within PROBE_TIMEOUT_S, else the outage.

    Only outages are answers: any other error is a bug, and raised.
    """
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await engine.ping()
    except Exception as exc:
        if outage_reason(exc) is None:
            raise
        return exc
    return None


class Health(tasks.OneLoop):
    """The health check of one pool: a tasks.Loop probing it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.down: str | None = None  # why the pool does not answer; None while it does
        self.loop = tasks.Loop("health", self._step, engine.pool)

    async def _step(self) -> float:
        outage = await probe(self.engine)
        reason = None if outage is None else outage_reason(outage)
        if reason != self.down:
            self._changed(reason, outage)
        return PROBE_EVERY_S

    def _changed(self, reason: str | None, outage: Exception | None) -> None:
        if outage is None:
            log.info("pool %s: redis answers again", self.engine.pool)
        else:
            log.error("pool %s: redis unavailable: %s", self.engine.pool, reason)
            self.engine.wake_hub.fail_all(outage)
        self.down = reason
