"""Pusher configurations (SPEC section 8): which queues of a namespace the server pushes, where, how.

Stored where lmstfy 1.0.10 keeps them, in the admin Redis: hash `__push_metas__`, field
`pm/{pool}/{ns}/{group}` -> the JSON lmstfy writes (queues, endpoint, workers, timeout) with
lmstfy-py's optional fields beside it (lmstfy ignores them), and a counter
`__push_metas_version__` bumped by every change. Every process polls the counter every POLL_S
and reloads the table when it moved, so a change reaches every process within a second
(lmstfy: 3 s); the push manager (push/manager.py) is told of each group created, changed or
deleted. A secret is stored (the server signs with it) but never shown.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from lmstfy_py import tasks
from lmstfy_py.admin.pools import PoolChecked
from lmstfy_py.config import NAME_RE
from lmstfy_py.errors import Conflict, InvalidParameter, NotFound
from lmstfy_py.push import shown as push_shown
from lmstfy_py.store import keys
from lmstfy_py.types import Backoff

log = logging.getLogger(__name__)

POLL_S = 0.5
MAX_QUEUES = 16
MAX_WORKERS = 64
MAX_TIMEOUT_S = 3600
MIN_SECRET_BYTES = 16
GroupKey = tuple[str, str, str]  # pool, namespace, group


@dataclass(frozen=True)
class Pusher:
    """One push group: its queues (the first wins, as in a multi-queue consume) and its endpoint."""

    queues: tuple[str, ...]
    endpoint: str
    workers: int  # concurrent deliveries per server process
    timeout: int  # seconds: of one POST, and before an undelivered job comes back
    backoff: Backoff | None = None  # beyond lmstfy: after a failed delivery; None: back after `timeout`
    max_attempts: int = 0  # beyond lmstfy: then to the dead letter; 0: retried until its ttl (lmstfy's)
    secret: str | None = None  # beyond lmstfy: signs every POST; never shown

    def shown(self, credentials: bool = True) -> dict[str, Any]:
        """As the admin API answers it: lmstfy's fields, and ours when set; never the secret. Without
        `credentials` (a read-only account, SPEC 15), the endpoint without its user-info and query."""
        answer: dict[str, Any] = {
            "queues": list(self.queues),
            "endpoint": self.endpoint if credentials else push_shown.endpoint(self.endpoint),
            "workers": self.workers,
            "timeout": self.timeout,
        }
        if self.backoff is not None:
            answer.update(backoff="exponential", backoff_ms=self.backoff.base_ms, backoff_max_ms=self.backoff.max_ms)
        if self.max_attempts:
            answer["max_attempts"] = self.max_attempts
        answer["signed"] = self.secret is not None
        return answer

    def stored(self) -> str:
        answer = self.shown()
        del answer["signed"]
        if self.secret is not None:
            answer["secret"] = self.secret
        return json.dumps(answer)


def pusher_from(found: Any, base: Pusher | None = None) -> Pusher:
    """A pusher from the JSON of a request (or of Redis), checked as lmstfy checks it and more.

    With `base` (lmstfy's PUT), a field left out or zero keeps the base's value; but a "secret"
    given as "" or null is dropped, so the POSTs are no longer signed.
    """
    if not isinstance(found, dict):
        raise InvalidParameter("the request body should be a JSON object")
    kept = base or Pusher((), "", 0, 0)
    pusher = Pusher(
        tuple(_queues(found.get("queues")) or kept.queues),
        _string(found, "endpoint") or kept.endpoint,
        _integer(found, "workers") or kept.workers,
        _integer(found, "timeout") or kept.timeout,
        _backoff(found, kept.backoff),
        _integer(found, "max_attempts") or kept.max_attempts,
        _secret(found["secret"]) if "secret" in found else kept.secret,  # "" or null: no longer signed
    )
    _check(pusher)
    return pusher


def _check(pusher: Pusher) -> None:
    # lmstfy's checks and texts first, in its order; then ours.
    if not 1 <= pusher.workers <= MAX_WORKERS:
        raise InvalidParameter(f"workers should be between 1 and {MAX_WORKERS}")
    if not 1 <= pusher.timeout <= MAX_TIMEOUT_S:
        raise InvalidParameter(f"timeout should be between 1 and {MAX_TIMEOUT_S}")
    parts = urlsplit(pusher.endpoint)
    # Go's url.ParseRequestURI, which lmstfy calls, takes an absolute URI or an absolute path.
    if not (parts.scheme or pusher.endpoint.startswith("/")) or " " in pusher.endpoint:
        raise InvalidParameter(f'parse "{pusher.endpoint}": invalid URI for request')
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameter("the endpoint should be an http:// or https:// URL")
    if not 1 <= len(pusher.queues) <= MAX_QUEUES:
        raise InvalidParameter(f"queues should be between 1 and {MAX_QUEUES}")
    if pusher.max_attempts < 0:
        raise InvalidParameter("max_attempts should not be negative")


def _queues(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        raise InvalidParameter("queues should be an array of queue names")
    for queue in value:
        if queue.startswith("_") or not NAME_RE.fullmatch(queue) or len(queue.encode()) > 255:
            raise InvalidParameter(f"invalid queue name: {queue!r}")
    return list(dict.fromkeys(value))


def _string(found: Mapping[str, Any], name: str) -> str | None:
    value = found.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidParameter(f"{name} should be a string")
    return value


def _integer(found: Mapping[str, Any], name: str) -> int | None:
    value = found.get(name)
    if value is not None and (type(value) is not int):  # bool is an int; Go refuses it, and 1.5
        raise InvalidParameter(f"{name} should be an integer")
    return value


def _secret(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value.encode()) < MIN_SECRET_BYTES:
        raise InvalidParameter(f"secret should be a string of at least {MIN_SECRET_BYTES} bytes")
    return value


def _backoff(found: Mapping[str, Any], base: Backoff | None) -> Backoff | None:
    policy = found.get("backoff")
    if policy is None:
        return base
    if policy == "fixed":
        return None
    if policy != "exponential":
        raise InvalidParameter('backoff should be "fixed" or "exponential"')
    default = base or Backoff()
    start = _integer(found, "backoff_ms") or default.base_ms
    most = _integer(found, "backoff_max_ms") or default.max_ms
    if start < 1 or most < start:
        raise InvalidParameter("backoff_ms should be at least 1, and backoff_max_ms at least backoff_ms")
    return Backoff(start, most)


def _split(field: bytes | str) -> GroupKey | None:
    text = field.decode() if isinstance(field, bytes) else field
    parts = text.split("/")
    return (parts[1], parts[2], parts[3]) if len(parts) == 4 and parts[0] == "pm" else None


Listener = Callable[[Mapping[GroupKey, Pusher]], None]


class PusherStore(PoolChecked, tasks.OneLoop):
    """The configurations in the admin Redis, and this process's copy of them."""

    def __init__(self, redis: Any, pools: Collection[str]) -> None:
        self.redis = redis
        self.pools = set(pools)
        self.table: dict[GroupKey, Pusher] = {}
        self._version: bytes | None = None
        self._loaded = False
        self._listeners: list[Listener] = []
        self.loop = tasks.Loop("pushers", self._poll)

    def listen(self, listener: Listener) -> None:
        """`listener` gets the whole table each time it changed (the push manager)."""
        self._listeners.append(listener)

    async def get(self, pool: str, ns: str, group: str) -> Pusher | None:
        self._check_pool(pool)
        raw = await self.redis.hget(keys.PUSH_METAS, keys.push_meta_field(pool, ns, group))
        return None if raw is None else pusher_from(json.loads(raw))

    async def all(self) -> dict[GroupKey, Pusher]:
        table = {}
        for field, raw in (await self.redis.hgetall(keys.PUSH_METAS)).items():
            where = _split(field)
            try:
                if where is not None:
                    table[where] = pusher_from(json.loads(raw))
            except (ValueError, InvalidParameter) as exc:  # edited by hand, or by a newer lmstfy
                log.warning("ignoring the pusher %s: %s", field, exc)
        return table

    async def create(self, pool: str, ns: str, group: str, pusher: Pusher) -> None:
        self._check_pool(pool)
        field = keys.push_meta_field(pool, ns, group)
        if not await self.redis.hsetnx(keys.PUSH_METAS, field, pusher.stored()):
            raise Conflict("the meta key has already exists")  # lmstfy's text (and its 500)
        await self._changed()

    async def update(self, pool: str, ns: str, group: str, found: Any) -> None:
        """lmstfy's PUT: the fields given (non-zero) replace the stored ones."""
        current = await self._existing(pool, ns, group)
        await self._store(pool, ns, group, pusher_from(found, base=current))

    async def replace(self, pool: str, ns: str, group: str, pusher: Pusher) -> None:
        """The whole configuration at once (the dashboard's edit form, which shows every field: a
        field cleared there, such as max_attempts, is cleared, where lmstfy's PUT keeps it)."""
        await self._existing(pool, ns, group)
        await self._store(pool, ns, group, pusher)

    async def _existing(self, pool: str, ns: str, group: str) -> Pusher:
        current = await self.get(pool, ns, group)
        if current is None:
            raise NotFound("the pusher was not found")
        return current

    async def _store(self, pool: str, ns: str, group: str, pusher: Pusher) -> None:
        await self.redis.hset(keys.PUSH_METAS, keys.push_meta_field(pool, ns, group), pusher.stored())
        await self._changed()

    async def delete(self, pool: str, ns: str, group: str) -> None:
        self._check_pool(pool)
        if not await self.redis.hdel(keys.PUSH_METAS, keys.push_meta_field(pool, ns, group)):
            raise NotFound("the meta key was not found")  # lmstfy's text (and its 500)
        await self._changed()

    async def _changed(self) -> None:
        await self.redis.incr(keys.PUSH_METAS_VERSION)
        await self._poll()  # this process applies it before answering

    # -- this process's copy ------------------------------------------------------------

    async def _poll(self) -> float:
        version = await self.redis.get(keys.PUSH_METAS_VERSION)
        if not self._loaded or version != self._version:
            table = await self.all()
            self.table, self._version, self._loaded = table, version, True
            for listener in self._listeners:
                listener(table)
        return POLL_S


def without_secret(pusher: Pusher) -> Pusher:
    return replace(pusher, secret=None)
