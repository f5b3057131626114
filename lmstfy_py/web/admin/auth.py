"""HTTP basic auth for the admin app when accounts are configured ([admin.accounts]).

With no account every admin route is open (lmstfy's default; the server warns at start when
the admin port is then reachable beyond loopback). With accounts, every route but the public
ones needs the user and password of one of them; a failure answers 401 with a basic-auth
challenge (web/errors.py adds the WWW-Authenticate header). Wrong credentials are counted per client
address (admin/logins.py): past the limit that address gets 429 with Retry-After, right credentials
included. The address is the connection's peer: behind a reverse proxy, the proxy's (no
X-Forwarded-For is trusted, for anyone could send one). A request without credentials is no guess
and is not counted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from lmstfy_py.admin.logins import Logins
from lmstfy_py.errors import Forbidden
from lmstfy_py.web.errors import LoginsLimited

if TYPE_CHECKING:
    from lmstfy_py.runtime import Runtime

# What probes and load balancers read without credentials; none of it is secret. /metrics names
# every namespace and queue: public only with `metrics_public = true`.
PUBLIC_ROUTES = frozenset({("GET", "/version"), ("GET", "/ready"), ("GET", "/pools")})
METRICS = ("GET", "/metrics")


def credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    """User and password of an `Authorization: Basic ...` header, None if absent or malformed."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def _same(given: bytes, expected: str) -> bool:
    # Digests first: compare_digest is constant-time only between equal lengths, so this hides the length too.
    return hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(expected.encode()).digest())


def authorized(accounts: Mapping[str, str], user: bytes, password: bytes) -> bool:
    """Whether user and password match one account, in time independent of which part differs."""
    found = False
    for name, secret in accounts.items():
        # `&` and `|`, not `and`/`or`: every account's user and password are compared, no early exit.
        found |= _same(user, name) & _same(password, secret)
    return found


class AdminAuthMiddleware:
    """Requires basic auth on every admin route but the public ones when accounts are configured."""

    def __init__(self, app: ASGIApp, logins: Logins) -> None:
        self.app = app
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._check(scope)
        await self.app(scope, receive, send)

    async def _check(self, scope: Scope) -> None:
        runtime: Runtime = scope["app"].state.runtime
        accounts = runtime.config.accounts
        asked = (scope["method"], scope["path"])
        if not accounts or asked in PUBLIC_ROUTES or (asked == METRICS and runtime.config.metrics_public):
            return
        header = Headers(scope=scope).get("authorization")
        if header is None:
            raise Forbidden("unauthorized")
        client = scope.get("client")
        address = client[0] if client else None
        given = credentials(header)
        if given is not None and authorized(accounts, *given):
            retry_after = await self.logins.refused(address)
        else:
            retry_after = await self.logins.failed(address)
            if retry_after is None:
                raise Forbidden("unauthorized")
        if retry_after is not None:
            raise LoginsLimited(retry_after)
