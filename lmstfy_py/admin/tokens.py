"""Tokens: each grants access to one namespace of one pool.

Stored in the admin Redis as one hash per (pool, namespace): token ->
description (lmstfy's, which it reads unchanged), and beside it (keys.token_grants)
the grant of each token created with scopes or queue patterns (admin/grants.py).
Every data-plane request looks its token's grant up (None: no such token), so
answers are cached for CACHE_TTL_S in the process; this process's own changes drop
the cache at once, another process's changes are seen within CACHE_TTL_S. Requests
that miss the cache at the same time (a burst of long-polls, every second of a busy
token) share one lookup: one script call reading both hashes, not one per request
and Redis connection.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from collections.abc import Collection, Hashable
from typing import Any

from lmstfy_py import tasks
from lmstfy_py.admin import grants
from lmstfy_py.admin.contracts import (
    TOKEN_CREATE,
    TOKEN_DELETE,
    TOKEN_GRANT,
    TokenArgs,
    TokenCreateArgs,
    TokenDeleteArgs,
    TokenKeys,
)
from lmstfy_py.admin.grants import Grant
from lmstfy_py.admin.pools import PoolChecked
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.store import keys

CACHE_TTL_S = 1.0
MIN_TOKEN_LEN = 20
DELETE_CHUNK = 1000  # tokens per delete script: Lua's unpack() has a stack limit
TokenKey = tuple[str, str, str]  # pool, namespace, token


class TokenStore(PoolChecked):
    def __init__(self, redis: Any, pools: Collection[str]) -> None:
        self.redis = redis
        self.pools = set(pools)
        # token key -> (grant, until when, monotonic). Read by grant() and, inline, by every data
        # request (web/hot_routes.check_token); written here alone.
        self.cache: dict[TokenKey, tuple[Grant | None, float]] = {}
        self._lookups: dict[Hashable, asyncio.Future[Grant | None]] = {}  # token key -> its lookup in flight
        # Bumped by every change this process makes: a lookup begun before it must not cache its answer.
        self._changes = 0

    async def create(
        self, pool: str, ns: str, description: str, token: str | None = None, grant: Grant = grants.UNRESTRICTED
    ) -> str:
        """Stores a new token (a random one unless given) with its grant and returns it."""
        self._check_pool(pool)
        if token is None:
            token = secrets.token_hex(16)
        elif len(token) < MIN_TOKEN_LEN:
            raise InvalidParameter("the user token was too short")
        created = await TOKEN_CREATE(self.redis, _keys(pool, ns), TokenCreateArgs(token, description, grant.encode()))
        await self.redis.sadd(keys.token_namespaces(pool), ns)
        if not created:
            raise InvalidParameter("the token has already existed")
        self._forget(pool, ns, token)
        return token

    async def list_tokens(self, pool: str, ns: str) -> dict[str, str]:
        self._check_pool(pool)
        found = await self.redis.hgetall(keys.tokens(pool, ns))
        return {k.decode(): v.decode() for k, v in found.items()}

    async def grants(self, pool: str, ns: str) -> dict[str, Grant]:
        """The grants of the namespace's tokens that have one (any other has every scope and queue)."""
        self._check_pool(pool)
        found = await self.redis.hgetall(keys.token_grants(pool, ns))
        return {k.decode(): grants.decode(v) for k, v in found.items()}

    async def delete(self, pool: str, ns: str, token: str) -> None:
        self._check_pool(pool)
        await TOKEN_DELETE(self.redis, _keys(pool, ns), TokenDeleteArgs((token,)))
        self._forget(pool, ns, token)

    async def delete_namespace(self, pool: str, ns: str) -> int:
        """Deletes every token of the namespace; returns how many there were."""
        self._check_pool(pool)
        tokens = await self.redis.hkeys(keys.tokens(pool, ns))
        # HDEL of the tokens read, not DEL: a token created meanwhile is not deleted unseen.
        deleted = 0
        for start in range(0, len(tokens), DELETE_CHUNK):
            deleted += await TOKEN_DELETE(
                self.redis, _keys(pool, ns), TokenDeleteArgs(tuple(tokens[start : start + DELETE_CHUNK]))
            )
        if not await self.redis.exists(keys.tokens(pool, ns)):
            await self.redis.srem(keys.token_namespaces(pool), ns)
        self._forget(pool, ns)
        return deleted

    async def adopt_lmstfy(self) -> int:
        """Registers the namespaces of tokens lmstfy made (its token hashes are ours, but it keeps no
        set of their namespaces); returns how many. Once, at the start of a server that found
        lmstfy's data: a SCAN of the admin Redis."""
        adopted = 0
        for pool in self.pools:
            async for key in self.redis.scan_iter(match=keys.tokens(pool, "*"), count=1000):
                ns = key.decode()[len(keys.tokens(pool, "")) :]
                adopted += int(await self.redis.sadd(keys.token_namespaces(pool), ns))
        return adopted

    async def namespaces(self, pool: str) -> list[str]:
        self._check_pool(pool)
        return sorted(m.decode() for m in await self.redis.smembers(keys.token_namespaces(pool)))

    async def exists(self, pool: str, ns: str, token: str) -> bool:
        return await self.grant(pool, ns, token) is not None

    async def grant(self, pool: str, ns: str, token: str) -> Grant | None:
        """What the token may do; None for no such token."""
        key = (pool, ns, token)
        cached = self.cache.get(key)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        return await tasks.shared(self._lookups, key, functools.partial(self._look_up, key))

    async def _look_up(self, key: TokenKey) -> Grant | None:
        pool, ns, token = key
        started, changes = time.monotonic(), self._changes
        stored = await TOKEN_GRANT(self.redis, _keys(pool, ns), TokenArgs(token))
        found = None if stored is None else grants.decode(stored)
        if changes == self._changes:
            if len(self.cache) > 100_000:  # bounds memory against clients spraying random tokens
                self.cache.clear()
            self.cache[key] = (found, started + CACHE_TTL_S)
        return found

    def _forget(self, pool: str, ns: str, token: str | None = None) -> None:
        """Drops the cached answers for one token, or (token None) for every token of the namespace."""
        self._changes += 1
        if token is not None:
            self.cache.pop((pool, ns, token), None)
        else:
            self.cache = {key: value for key, value in self.cache.items() if key[:2] != (pool, ns)}


def _keys(pool: str, ns: str) -> TokenKeys:
    return TokenKeys(keys.tokens(pool, ns), keys.token_grants(pool, ns))
