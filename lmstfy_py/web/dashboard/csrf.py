"""CSRF protection of the dashboard's forms: a signed double-submit token, and the browser's own word.

Behind basic auth a browser resends the operator's credentials with any request to the admin
port, a form another site submits included, and without accounts nothing stops such a request
at all: every mutating dashboard action checks that its form came from a dashboard page.

- Each browser gets a random nonce in a cookie (`lmstfy_ui`, HttpOnly, SameSite=Strict, path /ui).
- Each form carries HMAC-SHA256(secret, nonce) in a hidden field. The secret is random, made once
  by the first process that needs it and kept in the admin Redis (keys.DASHBOARD_SECRET), so
  every worker of every instance accepts what any of them signed. Another site can neither read
  the field nor compute it; a page on another port of the same host, which can set cookies for
  this one (cookies ignore ports), still cannot sign a nonce it chose.
- A request whose Origin is another origin, or whose Sec-Fetch-Site says cross-site, is refused
  before the token is even looked at.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.errors import CrossSiteRefused
from lmstfy_py.store import keys
from lmstfy_py.web.admin.cross_site import cross_site

COOKIE = "lmstfy_ui"
FIELD = "csrf"
_NONCE = re.compile(r"[0-9a-f]{32}")


class Csrf:
    """Signs and checks the dashboard's form tokens with the secret shared in the admin Redis."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self._secret: bytes | None = None

    async def secret(self) -> bytes:
        if self._secret is None:
            await self.redis.set(keys.DASHBOARD_SECRET, secrets.token_hex(32), nx=True)
            stored = await self.redis.get(keys.DASHBOARD_SECRET)
            if not stored:  # deleted between the two calls: the next request makes it again
                raise CrossSiteRefused("the dashboard's secret is not readable yet; reload the page")
            self._secret = bytes(stored)
        return self._secret

    async def token(self, nonce: str) -> str:
        return hmac.new(await self.secret(), nonce.encode(), hashlib.sha256).hexdigest()

    async def check(self, request: Request, token: str) -> None:
        """Raises CrossSiteRefused (403) unless the request is same-origin with a valid token."""
        if not same_origin(request):
            raise CrossSiteRefused("refused: this form was sent from another site")
        nonce = nonce_of(request)
        if nonce is None or not hmac.compare_digest(token.encode(), (await self.token(nonce)).encode()):
            raise CrossSiteRefused("refused: the form's security token is missing or expired; reload the page")


def nonce_of(request: Request) -> str | None:
    nonce = request.cookies.get(COOKIE, "")
    return nonce if _NONCE.fullmatch(nonce) else None


def new_nonce() -> str:
    return secrets.token_hex(16)


def set_nonce(response: Response, nonce: str) -> None:
    response.set_cookie(COOKIE, nonce, path="/ui", httponly=True, samesite="strict")


def same_origin(request: Request) -> bool:
    """What the browser says of where the request comes from; requests without those headers
    (old browsers, scripts) are left to the token."""
    return not cross_site(request.scope)
