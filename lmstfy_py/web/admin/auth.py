"""HTTP basic auth for the admin app when accounts are configured ([admin.accounts], and
[admin.readonly_accounts]: accounts that may only read, readonly.py).

With no account every admin route is open (lmstfy's default; the server warns at start when
the admin port is then reachable beyond loopback). With accounts, every route but the public
ones needs the user and password of one of them; a failure answers 401 with a basic-auth
challenge (web/errors.py adds the WWW-Authenticate header). Wrong credentials are counted per client
address (admin/logins.py): past the limit that address gets 429 with Retry-After, right credentials
included. The address is the connection's peer: behind a reverse proxy, the proxy's (no
X-Forwarded-For is trusted, for anyone could send one). A request without credentials is no guess
and is not counted. A read-only account's change is refused (403) once its login is accepted:
in JSON, or as a page under /ui.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import Literal

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from lmstfy_py.admin.logins import Logins
from lmstfy_py.config import Config
from lmstfy_py.errors import Forbidden
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.dashboard.render import error_page
from lmstfy_py.web.errors import LoginsLimited

# What probes and load balancers read without credentials; none of it is secret. /metrics names
# every namespace and queue: public only with `metrics_public = true`.
PUBLIC_ROUTES = frozenset({("GET", "/version"), ("GET", "/ready"), ("GET", "/pools")})
METRICS = ("GET", "/metrics")
DASHBOARD = "/ui"
READ_ONLY_PAGE = "This account is read-only: it can look at everything here and change nothing."


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


def account_kind(
    full: Mapping[str, str], read_only: Mapping[str, str], user: bytes, password: bytes
) -> Literal["full", "readonly"] | None:
    """Which kind of account user and password are, None for neither; both tables are always
    compared whole (a name is in one of them at most: the config refuses it in both)."""
    is_full, is_readonly = authorized(full, user, password), authorized(read_only, user, password)
    return "full" if is_full else "readonly" if is_readonly else None


class AdminAuthMiddleware:
    """Requires basic auth on every admin route but the public ones when accounts are configured."""

    def __init__(self, app: ASGIApp, logins: Logins) -> None:
        self.app = app
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._check(scope)
            if readonly.refused(scope):
                await self._refuse(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path != DASHBOARD and not path.startswith(DASHBOARD + "/"):
            raise readonly.ReadOnlyRefused(readonly.REFUSED)
        await error_page(READ_ONLY_PAGE, readonly.ReadOnlyRefused.status)(scope, receive, send)

    async def _check(self, scope: Scope) -> None:
        config: Config = scope["app"].state.runtime.config
        asked = (scope["method"], scope["path"])
        if not (config.accounts or config.readonly_accounts) or asked in PUBLIC_ROUTES:
            return
        if asked == METRICS and config.metrics_public:
            return
        header = Headers(scope=scope).get("authorization")
        if header is None:
            raise Forbidden("unauthorized")
        client = scope.get("client")
        address = client[0] if client else None
        given = credentials(header)
        kind = account_kind(config.accounts, config.readonly_accounts, *given) if given is not None else None
        if kind is not None:
            readonly.mark(scope, kind == "readonly")
            retry_after = await self.logins.refused(address)
        else:
            retry_after = await self.logins.failed(address)
            if retry_after is None:
                raise Forbidden("unauthorized")
        if retry_after is not None:
            raise LoginsLimited(retry_after)
