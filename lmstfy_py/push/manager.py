"""The push groups of one server process, kept in step with the configurations.

PusherStore (admin/pushers.py) hands over the whole table whenever it changed (within a second
of a change on any process); the manager starts a PushGroup for each new group, gives a changed
group its new configuration (a long-poll on its old queues ends; its next POST goes by the new
one), and stops the groups
that are gone. All groups share one HTTP client session: one pool of keep-alive connections per
process, never a connection per delivery. With `[push] allowed_networks` its connector checks the
address of every connect (delivery.sockets).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Self

import aiohttp

from lmstfy_py.admin.pushers import GroupKey, Pusher, PusherStore
from lmstfy_py.config import PushConfig
from lmstfy_py.push import delivery
from lmstfy_py.push.group import PushGroup
from lmstfy_py.store.pools import Pools

log = logging.getLogger(__name__)


class PushManager:
    def __init__(self, pools: Pools, pushers: PusherStore, config: PushConfig | None = None) -> None:
        self.pools = pools
        self.config = config if config is not None else PushConfig()
        self.groups: dict[GroupKey, PushGroup] = {}
        self._session: aiohttp.ClientSession | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._unknown_pools: set[str] = set()
        pushers.listen(self.apply)

    async def start(self) -> None:
        # Bodies unread are not decompressed either (a small gzip answer may inflate to GiBs); no
        # proxy from the environment (trust_env off): the address checked is the endpoint's own.
        self._session = aiohttp.ClientSession(
            connector=self._connector(), cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False, trust_env=False
        )

    def _connector(self) -> aiohttp.TCPConnector:
        # No limit of its own: each group bounds its deliveries (workers).
        networks = self.config.allowed_networks
        if networks is None:
            return aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
        # socket_factory (aiohttp 3.12+) is handed the address of each connect, after DNS and for IP literals.
        return aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True, socket_factory=delivery.sockets(networks))

    def apply(self, table: Mapping[GroupKey, Pusher]) -> None:
        if self._session is None:
            return
        for key in [key for key in self.groups if key not in table]:
            self._stop(key)
        for key, pusher in table.items():
            group = self.groups.get(key)
            if group is not None:
                group.pusher = pusher
            elif key[0] in self.pools:
                self.groups[key] = group = PushGroup(key, pusher, self.pools.get(key[0]), self._session)
                group.start()
            elif key[0] not in self._unknown_pools:
                self._unknown_pools.add(key[0])
                log.warning("pushers of pool %s are left alone: this server has no such pool", key[0])

    def _stop(self, key: GroupKey) -> None:
        task = asyncio.create_task(self.groups.pop(key).stop(), name=f"stop push {'/'.join(key)}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        for key in list(self.groups):
            self._stop(key)
        if self._stopping:
            await asyncio.wait(self._stopping)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
