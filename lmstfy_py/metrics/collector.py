"""The size and Redis collector: refreshes the queue-size and Redis gauges in the background."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

from redis.asyncio.cluster import RedisCluster

from lmstfy_py import tasks
from lmstfy_py.metrics.families import DEADLETTER_SIZES, QUEUE_SIZES, REDIS_GAUGES, TIMER_SIZES
from lmstfy_py.metrics.multiproc import directory
from lmstfy_py.metrics.recording import labels_for, series
from lmstfy_py.store import keys
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.faults import outage_reason
from lmstfy_py.store.pools import Pools

log = logging.getLogger(__name__)

COLLECT_EVERY_S = 5.0  # as lmstfy's size monitor
LOCK_FILE = "collector.lock"


class Collector(tasks.Background):
    """Refreshes the size and Redis gauges in the background, so a scrape costs no Redis call.

    With several workers only the one holding the lock file in the metrics directory
    collects: they share the directory, so one set of gauges is enough.
    """

    def __init__(self, pools: Pools, every_s: float = COLLECT_EVERY_S) -> None:
        self.pools = pools
        self.every_s = every_s
        self._reported: dict[str, set[tuple[str, str]]] = {}  # pool -> (namespace, queue) with sizes set
        self._lock: IO[bytes] | None = None
        # One refresh at a time: one that read the namespaces before another ran would
        # otherwise zero the queues the other just reported, as "gone".
        self._refreshing = asyncio.Lock()
        self._loop = tasks.Loop("collector", self._step)

    def start(self) -> None:
        directory()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        if self._lock is not None:
            self._lock.close()  # releases the flock: another worker may take over
            self._lock = None

    async def _step(self) -> float:
        if self._holds_lock():
            await self.refresh()
        return self.every_s

    def _holds_lock(self) -> bool:
        if self._lock is None:
            handle = open(os.path.join(directory(), LOCK_FILE), "ab")  # noqa: SIM115 (held until stop)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            self._lock = handle
        return True

    async def refresh(self) -> None:
        """Reads every pool's sizes and Redis INFO now; a pool that fails keeps its last values."""
        async with self._refreshing:
            await self._refresh()

    async def _refresh(self) -> None:
        for engine in self.pools.engines():
            try:
                await self._collect_sizes(engine)
                await _collect_info(engine)
            except Exception as exc:
                if outage_reason(exc) is None:
                    raise  # a bug: the Loop logs it
                log.debug("metrics of pool %s: %r", engine.pool, exc)  # the pool's health check reports outages

    async def _collect_sizes(self, engine: Engine) -> None:
        pool, client = engine.pool, engine.redis
        namespaces = await engine.namespaces()
        queue_sets = await _pipelined(client, [("smembers", keys.queues(ns)) for ns in namespaces])
        pairs = [(ns, q.decode()) for ns, members in zip(namespaces, queue_sets, strict=True) for q in sorted(members)]
        calls = [("zcard", keys.timer(ns)) for ns in namespaces]
        for ns, queue in pairs:
            calls += [
                ("llen", keys.ready(ns, queue)),
                ("zcard", keys.priority(ns, queue)),
                ("llen", keys.dead(ns, queue)),
            ]
        found = await _pipelined(client, calls)
        series(TIMER_SIZES, pool).set(sum(found[: len(namespaces)]))
        per_queue = found[len(namespaces) :]
        # Ready jobs are those of the ready list and of the priority set.
        sizes = [n for i in range(0, len(per_queue), 3) for n in (per_queue[i] + per_queue[i + 1], per_queue[i + 2])]
        # Files cannot forget a series: a queue that is gone (purged namespace) reads 0 from now on.
        gone = self._reported.get(pool, set()) - set(pairs)
        for family, offset in ((QUEUE_SIZES, 0), (DEADLETTER_SIZES, 1)):
            totals: Counter[tuple[str, ...]] = Counter()
            for i, (ns, queue) in enumerate(pairs):
                # Past the family's cap, the queues of the overflow series are summed.
                totals[labels_for(family, (pool, ns, queue))] += sizes[2 * i + offset]
            for ns, queue in gone:
                totals[labels_for(family, (pool, ns, queue))] += 0
            for labels, total in totals.items():
                series(family, *labels).set(total)
        self._reported[pool] = set(pairs)


async def _pipelined(client: Any, calls: Sequence[tuple[str, str]]) -> list[Any]:
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for command, key in calls:
        getattr(pipe, command)(key)
    return list(await pipe.execute())


async def _collect_info(engine: Engine) -> None:
    """lmstfy's Redis gauges from INFO, summed over a cluster's primaries."""
    client = engine.redis
    if isinstance(client, RedisCluster):
        await client.initialize()  # a no-op once the client knows its nodes
        infos = [await client.info(target_nodes=node) for node in client.get_primaries()]
    else:
        infos = [await client.info()]
    totals = dict.fromkeys(REDIS_GAUGES, 0)
    for info in infos:
        for field in ("maxmemory", "used_memory", "connected_clients", "blocked_clients"):
            totals[field] += int(info.get(field, 0))
        for name, db in info.items():
            if name.startswith("db") and isinstance(db, dict):
                totals["keys"] += int(db.get("keys", 0))
                totals["expires"] += int(db.get("expires", 0))
    for field, gauge in REDIS_GAUGES.items():
        series(gauge, engine.pool).set(totals[field])
