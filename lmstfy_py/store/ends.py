"""Job ends told to the result() waiters of one process and pool (store/outcomes.py; SPEC 13).

A waiter sets the counter keys.waiters(ns, q, id) while it waits; every step that ends a job
(completes, ACKs, deletes it, or kills it) looks at that counter and only when it is set
PUBLISHes the job's fields on its namespace's channel keys.ended_channel(ns) (lua/_lib.lua's
tell_waiters): jobs nobody waits for cost one GET at their end. This process listens with one
subscription per pool (a Redis Cluster forwards a classic PUBLISH to every node, so any node's
will do) to the namespaces its waiters wait in, and settles each waiter of a job told.

Like the wake loops (store/wake.py), its reading Loop starts with the first subscription. After
a failure (a Redis restart, a failover) its next read connects and subscribes again; a waiter
reads its job again every RECHECK_S (store/outcomes.py) anyway, so an end told while no
subscription listened is found then.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import msgpack
from redis.asyncio.cluster import RedisCluster

from lmstfy_py import tasks
from lmstfy_py.store import keys
from lmstfy_py.store.contracts.jobs import JobState

READ_S = 1.0  # one read's wait for a message
CONFIRM_S = 1.0  # how long a waiter waits for its subscription before it goes on (polling)
Waiter = asyncio.Future[JobState | None]  # the job's fields at its end; None: stop waiting


def told(message: bytes) -> tuple[str, JobState]:
    """("q/id", the job's fields) of a message tell_waiters published; false fields read as absent."""
    member, fields = msgpack.unpackb(message, raw=True)
    return member.decode(), JobState._make(None if field is False else field for field in fields)


class EndWatch:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._pubsub = client.pubsub()
        self._waiters: dict[tuple[str, str], set[Waiter]] = {}
        self._confirmed: dict[str, asyncio.Event] = {}  # channel -> set once Redis confirmed it
        self._loop = tasks.Loop("ends", self._read_once)
        self.closed = False

    @contextlib.contextmanager
    def waiting(self, ns: str, queue: str, job_id: str) -> Iterator[Waiter]:
        """A future settled with the job's fields when it ends (None when this watch closes)."""
        waiter: Waiter = asyncio.get_running_loop().create_future()
        if self.closed:
            waiter.set_result(None)
        key = (keys.ended_channel(ns), f"{queue}/{job_id}")
        self._waiters.setdefault(key, set()).add(waiter)
        try:
            yield waiter
        finally:
            found = self._waiters.get(key)
            if found is not None:
                found.discard(waiter)
                if not found:
                    del self._waiters[key]

    async def subscribe(self, ns: str) -> None:
        """Listens to the namespace's ends; returns once Redis confirmed it (or after CONFIRM_S)."""
        channel = keys.ended_channel(ns)
        confirmed = self._confirmed.get(channel)
        if confirmed is None:
            confirmed = self._confirmed[channel] = asyncio.Event()
            try:
                if isinstance(self._client, RedisCluster):  # its node map, read on its first command
                    await self._client.initialize()
                await self._pubsub.subscribe(channel)
            except Exception:
                del self._confirmed[channel]
                raise
            if not self._loop.running:
                self._loop.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(confirmed.wait(), CONFIRM_S)

    async def _read_once(self) -> float | None:
        if self.closed:
            return None
        # A failed read raises (the Loop retries after a backoff); the next one connects again and
        # redis-py's PubSub subscribes again to every channel it had.
        message = await self._pubsub.get_message(timeout=READ_S)
        if message is None:
            return 0
        channel = bytes(message["channel"]).decode()
        if message["type"] == "subscribe" and channel in self._confirmed:
            self._confirmed[channel].set()
        elif message["type"] == "message":
            member, fields = told(message["data"])
            for waiter in self._waiters.get((channel, member), ()):
                if not waiter.done():
                    waiter.set_result(fields)
        return 0

    async def close(self) -> None:
        """Settles every waiter with None (each answers its job as it is now) and stops listening."""
        self.closed = True
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        await self._loop.cancel()
        with contextlib.suppress(Exception):
            await self._pubsub.aclose()
