"""Run-time switches shared by every process on the admin Redis: today the access log's.

POST /accesslog on any worker of any instance stores the new state with a bumped version (one
script); every process polls the version every POLL_S and applies a change it has not seen,
so a switch reaches the whole server within about POLL_S. A process starts with its own config
(`access_log`, `--access-log`): only changes made after it started override that. GET /accesslog
reads the stored switch (`current`) rather than waiting for the poll: right after a POST on one
worker, a GET landing on another must not answer the old state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Self

from redis.exceptions import RedisError

from lmstfy_py import tasks
from lmstfy_py.admin.contracts import SWITCH_SET, SwitchArgs, SwitchKeys
from lmstfy_py.store import keys

log = logging.getLogger(__name__)

POLL_S = 0.5


class Switch(tasks.OneLoop):
    """One on/off switch: `on` is this process's view, `set` changes it everywhere."""

    def __init__(self, redis: Any, key: str, name: str, initially: bool) -> None:
        self.redis = redis
        self.key = key
        self.on = initially
        self._version: int | None = None  # the last version seen; None until the first poll
        # A poll, a read and a set each read-then-apply across an await: one at a time, so that an
        # older version read by one never overwrites a newer one applied by another.
        self._lock = asyncio.Lock()
        self.loop = tasks.Loop("switch", self._poll, name)

    async def __aenter__(self) -> Self:
        # The version stored at this process's start, read before it serves: a change another
        # worker makes before this one's first poll is then one it has not seen, and applies.
        with contextlib.suppress(RedisError, OSError):  # Redis not answering yet: the first poll reads it
            await self._refresh()
        self.start()
        return self

    async def set(self, on: bool) -> None:
        """Switches it here at once, and everywhere within POLL_S."""
        async with self._lock:
            self.on = on
            self._version = await SWITCH_SET(self.redis, SwitchKeys(self.key), SwitchArgs("1" if on else "0"))

    async def current(self) -> bool:
        """The switch as stored now (a change since this process started), else this process's own."""
        await self._refresh()
        return self.on

    async def _poll(self) -> float:
        await self._refresh()
        return POLL_S

    async def _refresh(self) -> None:
        async with self._lock:
            state, version = await self.redis.hmget(self.key, "state", "version")
            seen = int(version or 0)
            if self._version is not None and seen != self._version and state is not None:
                self.on = state == b"1"
            self._version = seen


def access_log(redis: Any, initially: bool) -> Switch:
    return Switch(redis, keys.ACCESS_LOG_SWITCH, "accesslog", initially)
