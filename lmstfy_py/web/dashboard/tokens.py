"""Tokens and their limits (GET /ui/tokens): list a pool's tokens by namespace, create one (shown
once, in full), delete one (after a confirmation), set or delete a token's limit. A read-only
account sees each token's short hash only, and none of the forms (web/admin/readonly.py)."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.admin import grants
from lmstfy_py.admin.grants import Grant
from lmstfy_py.admin.limits import Limit
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import limit_params, params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.dashboard import render

TOKENS = "/ui/tokens"
NAV = render.NavItem("Tokens", TOKENS)
MIN_USER_TOKEN_LEN = 20


async def show_tokens(request: Request) -> Response:
    runtime, pool = render.runtime_of(request), render.pool_of(request)
    names = sorted(set(await runtime.tokens.namespaces(pool)) | set(await runtime.pools.get(pool).namespaces()))
    limits = {
        (found.namespace, found.token): found.limit for found in await runtime.limits.list_all() if found.pool == pool
    }
    namespaces = []
    for ns in names:
        tokens, granted = await runtime.tokens.list_tokens(pool, ns), await runtime.tokens.grants(pool, ns)
        shown = {token: readonly.shown(request.scope, token) for token in tokens}
        rows = [(shown[t], tokens[t], limits.get((ns, t)), _grant_shown(granted.get(t))) for t in tokens]
        namespaces.append((ns, sorted(rows, key=lambda row: row[0])))
    return await render.page(request, "tokens.html", {"namespaces": namespaces})


def _grant_shown(grant: Grant | None) -> tuple[str, str]:
    """A token's scopes and queue patterns as the page shows them: "all" for no restriction."""
    found = (grant or grants.UNRESTRICTED).as_json()
    return ", ".join(found["scope"] or ["all"]), ", ".join(found["queues"] or ["all"])


def _namespace(fields: dict[str, str]) -> str:
    ns = fields.get("namespace", "").strip()
    params.check_namespace(ns, too_long="the namespace name was too long")
    return ns


def _token(fields: dict[str, str]) -> str:
    token = fields.get("token", "")
    if not token:
        raise InvalidParameter("invalid token")
    return token


async def create(request: Request) -> Response:
    """As POST /token/{ns}; the page that answers shows the new token once (no redirect: it would
    put the token in a URL, the browser's history and access logs)."""
    runtime, pool, fields = await render.posted(request)
    ns, description = _namespace(fields), fields.get("description", "").strip()
    if not description:
        raise InvalidParameter("invalid description")
    chosen = fields.get("token", "").strip() or None
    if chosen is not None and len(chosen) < MIN_USER_TOKEN_LEN:
        raise InvalidParameter("the user token was too short")
    # An empty field is "all", as POST /token/{ns} without the parameter.
    grant = grants.parse(fields.get("scope", "").strip() or None, fields.get("queues", "").strip() or None)
    token = await runtime.tokens.create(pool, ns, description, chosen, grant)
    context = {"ns": ns, "description": description, "token": token, "no_refresh": True}
    return await render.page(request, "token_created.html", context, status=201)


async def delete(request: Request) -> Response:
    """As DELETE /token/{ns}/{token}: the token and its limit, once confirmed."""
    runtime, pool, fields = await render.posted(request)
    ns, token = _namespace(fields), _token(fields)
    if not render.confirmed(fields):
        details = "Clients using this token get 401 from now on. Its limit is deleted too."
        return await render.confirm(request, f"Delete a token of {ns}?", details, {"namespace": ns, "token": token})
    await runtime.tokens.delete(pool, ns, token)
    await runtime.limits.delete(pool, ns, token)
    return render.back_to(TOKENS, pool, "token_deleted")


def _limit(fields: dict[str, str]) -> Limit:
    """The form's read, write and interval, checked as PUT /token/{ns}/{token}/limit checks its JSON."""
    found: dict[str, int] = {}
    for name in ("read", "write", "interval"):
        raw = fields.get(name, "").strip() or "0"
        if not raw.isdigit():
            raise InvalidParameter(f"invalid {name}: should be an integer")
        found[name] = int(raw)
    return limit_params.limiter(json.dumps(found).encode())


async def set_limit(request: Request) -> Response:
    runtime, pool, fields = await render.posted(request)
    await runtime.limits.set(pool, _namespace(fields), _token(fields), _limit(fields))
    return render.back_to(TOKENS, pool, "limit_set")


async def delete_limit(request: Request) -> Response:
    runtime, pool, fields = await render.posted(request)
    await runtime.limits.delete(pool, _namespace(fields), _token(fields))
    return render.back_to(TOKENS, pool, "limit_deleted")


ROUTES = render.page_routes(
    TOKENS, show_tokens, {"create": create, "delete": delete, "limit": set_limit, "limit/delete": delete_limit}
)
