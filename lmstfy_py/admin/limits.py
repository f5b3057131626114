"""Throttle limits: at most `read` consumes and `write` publishes per `interval` seconds, per token.

Definitions live in one hash of the admin Redis (keys.LIMITS) beside a version counter
(keys.LIMITS_VERSION) that every change bumps in the same script. Each process keeps the whole
table in memory and polls the version every REFRESH_S, reloading the table when it moved: a
change made on any process takes effect on every process within about REFRESH_S, and a request
of a token without a limit costs a dict lookup, no Redis round trip.

Counters live in the admin Redis too, so every process shares them: one key per token and side,
holding the current window (opened by its first unit, lasting `interval`, as lmstfy's; a changed
interval applies to the open window at once) and the units taken in it. Taking a unit is one
script call; a request that fails afterwards gives its unit back, but only to the window it was
taken from, so a long-poll that outlived its window cannot free a unit of the next one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Self

from redis.exceptions import RedisError

from lmstfy_py import metrics, tasks
from lmstfy_py.admin.contracts import (
    LIMIT_DELETE,
    LIMIT_SET,
    THROTTLE_GIVE_BACK,
    THROTTLE_TAKE,
    CounterKeys,
    GiveBackArgs,
    LimitDeleteArgs,
    LimitKeys,
    LimitSetArgs,
    TakeArgs,
)
from lmstfy_py.admin.pools import PoolChecked
from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter, Throttled
from lmstfy_py.metrics.recording import token_label
from lmstfy_py.store import keys

log = logging.getLogger(__name__)

REFRESH_S = 0.5  # a change is seen everywhere within this (plus one HGETALL)
DELETE_CHUNK = 1000  # fields per HDEL: Lua's unpack() has a stack limit


@dataclass(frozen=True, slots=True)
class Limit:
    read: int  # consumes per interval, 0 = unlimited
    write: int  # publishes (a bulk publish counts once) per interval, 0 = unlimited
    interval: int  # seconds, > 0

    def as_json(self) -> dict[str, int]:
        return {"read": self.read, "write": self.write, "interval": self.interval}

    def per_window(self, read: bool) -> int:
        return self.read if read else self.write


@dataclass(frozen=True, slots=True)
class TokenLimit:
    pool: str
    namespace: str
    token: str
    limit: Limit

    def as_json(self) -> dict[str, Any]:
        # lmstfy shows a token of another pool with its "pool:" prefix, as the data plane takes it.
        shown = self.token if self.pool == DEFAULT_POOL else f"{self.pool}:{self.token}"
        return {"namespace": self.namespace, "token": shown, "limiter": self.limit.as_json()}


@dataclass(frozen=True, slots=True)
class Permit:
    """One unit taken from a counter: what a failed request needs to give it back."""

    counter: str
    window: int  # when the window the unit was taken from opened (ms, Redis clock)


def limit_from_json(raw: bytes | str) -> Limit:
    """A stored limit; ValueError if it is not one (the hash was edited by hand)."""
    found = json.loads(raw)
    limit = Limit(int(found["read"]), int(found["write"]), int(found["interval"]))
    if limit.interval <= 0 or min(limit.read, limit.write) < 0 or limit.read == limit.write == 0:
        raise ValueError(f"not a usable limit: {found}")
    return limit


def _split_field(field: bytes) -> tuple[str, str, str]:
    pool, ns, token = field.decode().split("/", 2)
    return pool, ns, token


def _parse_table(raw: dict[bytes, bytes]) -> dict[tuple[str, str, str], Limit]:
    table = {}
    for field, value in raw.items():
        try:
            table[_split_field(field)] = limit_from_json(value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the malformed limit %r: %s", field, exc)
    return table


class LimitStore(PoolChecked):
    def __init__(self, redis: Any, pools: Collection[str]) -> None:
        self.redis = redis
        self.pools = set(pools)
        # (pool, namespace, token) -> its limit: the table in force, read by the throttle
        # (web/hot_routes.Throttle) and take(); replaced whole by each refresh.
        self.table: dict[tuple[str, str, str], Limit] = {}
        self._version: bytes | None = None
        self._loaded = False
        self._changes = 0  # this process's changes: a reload that overlapped one is not trusted
        # While Redis is away the last table loaded stays in force.
        self._loop = tasks.Loop("limits", self._refresh_step)

    # -- definitions (admin API) ------------------------------------------------------

    async def get(self, pool: str, ns: str, token: str) -> Limit | None:
        """Read from Redis, not the cache: the admin API shows what is stored."""
        self._check_pool(pool)
        raw = await self.redis.hget(keys.LIMITS, keys.limit_field(pool, ns, token))
        return None if raw is None else limit_from_json(raw)

    async def list_all(self) -> list[TokenLimit]:
        table = _parse_table(await self.redis.hgetall(keys.LIMITS))
        return [TokenLimit(*where, limit) for where, limit in sorted(table.items())]

    async def create(self, pool: str, ns: str, token: str, limit: Limit) -> None:
        if not await self._store(pool, ns, token, limit, only_new=True):
            raise InvalidParameter("the limit has already existed")

    async def set(self, pool: str, ns: str, token: str, limit: Limit) -> None:
        """Creates or replaces the token's limit (lmstfy's PUT)."""
        await self._store(pool, ns, token, limit, only_new=False)

    async def _store(self, pool: str, ns: str, token: str, limit: Limit, only_new: bool) -> bool:
        self._check_pool(pool)
        value = json.dumps(limit.as_json())
        args = LimitSetArgs(keys.limit_field(pool, ns, token), value, "1" if only_new else "0")
        stored = await LIMIT_SET(self.redis, LimitKeys(keys.LIMITS, keys.LIMITS_VERSION), args)
        if stored:
            self._changes += 1
            self.table[(pool, ns, token)] = limit
        return stored

    async def delete(self, pool: str, ns: str, token: str) -> bool:
        """Deletes the token's limit; False if it had none."""
        self._check_pool(pool)
        return await self._delete_fields([keys.limit_field(pool, ns, token)]) > 0

    async def delete_namespace(self, pool: str, ns: str) -> int:
        """Deletes every limit of the namespace's tokens; returns how many there were."""
        self._check_pool(pool)
        prefix = keys.limit_field(pool, ns, "")
        fields = [field.decode() for field in await self.redis.hkeys(keys.LIMITS)]
        return await self._delete_fields([field for field in fields if field.startswith(prefix)])

    async def _delete_fields(self, fields: list[str]) -> int:
        deleted = 0
        for at in range(0, len(fields), DELETE_CHUNK):
            chunk = fields[at : at + DELETE_CHUNK]
            call_keys = LimitKeys(keys.LIMITS, keys.LIMITS_VERSION)
            deleted += await LIMIT_DELETE(self.redis, call_keys, LimitDeleteArgs(tuple(chunk)))
        if fields:
            self._changes += 1
            gone = set(fields)
            self.table = {where: lim for where, lim in self.table.items() if keys.limit_field(*where) not in gone}
        return deleted

    async def adopt_lmstfy(self) -> int:
        """Takes in the limits lmstfy kept (its hash keys.LMSTFY_LIMITS, same fields and JSON) that
        this store lacks; returns how many. Once, at the start of a server that found lmstfy's data."""
        adopted = 0
        for field, value in (await self.redis.hgetall(keys.LMSTFY_LIMITS)).items():
            try:
                pool, ns, token = _split_field(field)
                limit = limit_from_json(value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring lmstfy's malformed limit %r: %s", field, exc)
                continue
            if pool in self.pools and await self._store(pool, ns, token, limit, only_new=True):
                adopted += 1
        return adopted

    # -- throttling (data plane) ------------------------------------------------------

    async def take(self, pool: str, ns: str, token: str, action: str) -> Permit | None:
        """Takes a unit for one request; None if the token is not limited on that side.

        Raises Throttled (429) when the token's window has no unit left.
        """
        limit = self.table.get((pool, ns, token))
        read = action == "consume"
        if limit is None or limit.per_window(read) == 0:
            return None
        counter = keys.throttle_counter(pool, ns, token, read)
        args = TakeArgs(limit.per_window(read), limit.interval * 1000)
        window = await THROTTLE_TAKE(self.redis, CounterKeys(counter), args)
        if window is None:
            metrics.rate_limit_hit(pool, ns, token, action)
            # lmstfy's text, but naming the token as metrics do: an error text never holds a secret.
            raise Throttled(f"token({token_label(token)}) {action} reach the limit rate, please retry later")
        return Permit(counter, window)

    async def give_back(self, permit: Permit) -> None:
        """Never raises: the failed request's own error is the one to answer."""
        try:
            await THROTTLE_GIVE_BACK(self.redis, CounterKeys(permit.counter), GiveBackArgs(permit.window))
        except (RedisError, OSError) as exc:
            log.warning("cannot give a throttle unit back to %s (it ends with its window): %s", permit.counter, exc)

    # -- the in-process table ------------------------------------------------------

    async def refresh(self) -> None:
        """Reloads the table if the stored version moved since the last load."""
        changes = self._changes
        version = await self.redis.get(keys.LIMITS_VERSION)
        if self._loaded and version == self._version:
            return
        table = _parse_table(await self.redis.hgetall(keys.LIMITS))
        if changes != self._changes:
            return  # a change of ours landed meanwhile; the table read may predate it: read again next time
        self.table, self._version, self._loaded = table, version, True

    async def start(self) -> None:
        """Loads the table (if Redis answers: a server may start while Redis is away) and keeps it fresh."""
        try:
            await self.refresh()
        except Exception as exc:  # the loop's steps retry it, and log it if it is a bug
            log.debug("cannot load the throttle limits yet: %r", exc)
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _refresh_step(self) -> float:
        await self.refresh()
        return REFRESH_S
