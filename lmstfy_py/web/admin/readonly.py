"""Read-only admin accounts ([admin.readonly_accounts], SPEC 15): what such an account may do, and
what it is never shown.

The auth middleware (auth.py) marks on the request's scope which kind of account logged in. A
read-only account may GET (and HEAD) every admin route; any other method is refused with 403
before any route runs, so nothing changes. It never sees a token either: with one it could act on
the data plane (delete dead letters, destroy queues) what it may not on the admin port. Where a
token would be shown, it sees `sha256:` and the token's short hash (the first 12 hex digits of its
SHA-256, as metrics show it; a `pool:` prefix stays): enough to tell tokens apart and to match one
a full account holds, nothing to use. A push group's endpoint it sees without its user-info and
query, where credentials go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.types import Scope

from lmstfy_py.admin.pushers import Pusher
from lmstfy_py.errors import LmstfyError
from lmstfy_py.metrics.recording import token_label

READS = frozenset({"GET", "HEAD"})
REFUSED = "read-only account"
HASH_PREFIX = "sha256:"
_SCOPE_KEY = "lmstfy_py.readonly"  # set by auth.py on every request it let through with credentials


class ReadOnlyRefused(LmstfyError):
    """A change asked by a read-only account."""

    status = 403


def mark(scope: Scope, readonly: bool) -> None:
    scope[_SCOPE_KEY] = readonly


def is_readonly(scope: Scope) -> bool:
    """Whether a read-only account made the request (False without accounts, or a full one)."""
    return bool(scope.get(_SCOPE_KEY, False))


def refused(scope: Scope) -> bool:
    """Whether the request is a change a read-only account asks for."""
    return is_readonly(scope) and scope["method"] not in READS


def masked(token: str) -> str:
    # The short hash metrics and the throttle's 429 show: one name for a token everywhere.
    return HASH_PREFIX + token_label(token)


def shown(scope: Scope, token: str) -> str:
    """The token as this request's account may see it."""
    return masked(token) if is_readonly(scope) else token


def shown_pusher(scope: Scope, pusher: Pusher) -> dict[str, Any]:
    """The push group as this request's account may see it: a read-only one, without its endpoint's
    credentials."""
    return pusher.shown(credentials=not is_readonly(scope))


def hide_token_keys(scope: Scope, answer: Mapping[str, Any]) -> dict[str, Any]:
    """GET /token/{ns}'s answer with every map in it keyed by token ("tokens", and "scopes" beside
    it) keyed by what the account may see."""
    if not is_readonly(scope):
        return dict(answer)
    return {name: _masked_keys(found) if isinstance(found, Mapping) else found for name, found in answer.items()}


def _masked_keys(found: Mapping[str, Any]) -> dict[str, Any]:
    return {masked(token): value for token, value in found.items()}
