"""What a token may do (SPEC 15 "Scoped tokens"): its scopes and the queue patterns it may touch.

A Grant is what the token check hands every data-plane request: the route's scope is a bit of a
mask and its queue (or its queues, comma-joined) is matched against the token's patterns, so a
request of a token without restrictions tests one attribute (`unrestricted`). Stored beside
lmstfy's token hash as a compact JSON (`encode`/`decode`); no stored grant = every scope, every
queue, as lmstfy's tokens and ours made before scopes existed.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lmstfy_py.errors import InvalidParameter

PUBLISH, CONSUME, READ, MANAGE = 1, 2, 4, 8
SCOPES = {"publish": PUBLISH, "consume": CONSUME, "read": READ, "manage": MANAGE}  # in the order listed
EVERY_SCOPE = PUBLISH | CONSUME | READ | MANAGE
# A pattern is spelled with a queue name's characters and the globs' own.
PATTERN_RE = re.compile(r"[-_A-Za-z0-9*?\[\]!]+")
log = logging.getLogger(__name__)

MAX_DECISIONS = 1024  # cached per-queue answers of one grant: bounds memory against queue names sprayed


@dataclass(slots=True)
class Grant:
    scope: tuple[str, ...] | None  # None: every scope
    queues: tuple[str, ...] | None  # None: every queue
    unrestricted: bool = field(init=False)
    _mask: int = field(init=False)
    _match: Callable[[str], object] | None = field(init=False)
    _decisions: dict[str, bool] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.unrestricted = self.scope is None and self.queues is None
        self._mask = EVERY_SCOPE if self.scope is None else sum(SCOPES[name] for name in self.scope)
        # fnmatch.translate's regexes end in \Z: each alternative matches a whole name, case-sensitively.
        alternatives = "|".join(fnmatch.translate(pattern) for pattern in self.queues or ())
        self._match = None if self.queues is None else re.compile(alternatives).match

    def allows(self, scope: int, queue: str) -> bool:
        """Whether the token may use a route of `scope` (one bit or several, all needed) on `queue`
        ("q1,q2": on each of them)."""
        if scope & ~self._mask:
            return False
        if self._match is None:
            return True
        decided = self._decisions.get(queue)
        if decided is None:
            match = self._match
            decided = all(match(name) is not None for name in queue.split(","))
            if len(self._decisions) >= MAX_DECISIONS:
                self._decisions.clear()
            self._decisions[queue] = decided
        return decided

    def as_json(self) -> dict[str, list[str] | None]:
        return {"scope": _listed(self.scope), "queues": _listed(self.queues)}

    def encode(self) -> str:
        """The stored form, "" for an unrestricted grant (nothing is stored for it)."""
        return "" if self.unrestricted else json.dumps(self.as_json(), separators=(",", ":"))


UNRESTRICTED = Grant(None, None)
NOTHING = Grant((), ())


@functools.lru_cache(maxsize=1024)
def decode(stored: bytes | str | None) -> Grant:
    """The grant stored; one object per stored form, so its per-queue answers outlive the token cache."""
    if not stored:
        return UNRESTRICTED
    try:
        found = json.loads(stored)
        scope, queues = _tupled(found.get("scope")), _tupled(found.get("queues"))
        if scope is not None and not set(scope) <= SCOPES.keys():
            raise ValueError("unknown scope")
        return Grant(scope, queues)
    except (ValueError, TypeError, AttributeError, re.error) as error:
        # A grant edited by hand or written by a later version: its token may do nothing (403),
        # rather than everything or a 500 on each request. Logged once per stored form (the cache).
        log.warning("a token's stored grant is unreadable (%s): the token is refused every scope", error)
        return NOTHING


def parse(scope: str | None, queues: str | None) -> Grant:
    """The grant of a token-create's `scope=S,...` and `queues=P,...` (None: not given); 400 for bad ones."""
    scopes = None if scope is None else _items(scope, "invalid scope")
    if scopes is not None and not all(name in SCOPES for name in scopes):
        raise InvalidParameter("invalid scope")
    patterns = None if queues is None else _items(queues, "invalid queues")
    if patterns is not None and not all(PATTERN_RE.fullmatch(pattern) for pattern in patterns):
        raise InvalidParameter("invalid queues")
    ordered = None if scopes is None else tuple(name for name in SCOPES if name in scopes)
    return Grant(ordered, patterns)


def _items(raw: str, error: str) -> tuple[str, ...]:
    """The comma-separated items, each once in their order; an empty list or item is `error`."""
    items = raw.split(",")
    if not all(items):
        raise InvalidParameter(error)
    return tuple(dict.fromkeys(items))


def _listed(items: tuple[str, ...] | None) -> list[str] | None:
    return None if items is None else list(items)


def _tupled(items: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if items is None else tuple(items)
