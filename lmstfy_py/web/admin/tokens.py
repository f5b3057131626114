"""Admin routes for tokens: list, create and delete a namespace's tokens (lmstfy's token API, and SPEC 15's
scopes and queue patterns)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.admin import grants
from lmstfy_py.config import DEFAULT_POOL
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.admin.request import form_values, namespace_of, pool_of, runtime_of
from lmstfy_py.web.middleware import route

MIN_USER_TOKEN_LEN = 20


async def list_tokens(request: Request) -> Response:
    ns = namespace_of(request)
    store, pool = runtime_of(request).tokens, pool_of(request)
    tokens, granted = await store.list_tokens(pool, ns), await store.grants(pool, ns)
    answer: dict[str, Any] = {"tokens": tokens}
    # Beside lmstfy's map, each token's scopes and queue patterns (null: all); without any, lmstfy's
    # answer alone (SPEC Part III: what uses none of it answers as lmstfy).
    if granted.keys() & tokens.keys():
        answer["scopes"] = {token: granted.get(token, grants.UNRESTRICTED).as_json() for token in tokens}
    return JSONResponse(readonly.hide_token_keys(request.scope, answer))


async def create_token(request: Request) -> Response:
    # Differs from lmstfy, which checks the description first: a bad name is the truer answer,
    # and no description would make a token of it.
    ns = namespace_of(request)
    body = await params.read_body(request)
    form = form_values(body, request.headers.get("content-type", ""), request.query_params)
    description, user_token = form.get("description", ""), form.get("token", "")
    if not description:
        raise InvalidParameter("invalid description")
    grant = grants.parse(form.get("scope"), form.get("queues"))
    if user_token and len(user_token) < MIN_USER_TOKEN_LEN:
        raise InvalidParameter("the user token was too short")
    pool, token = pool_of(request), user_token or None
    # lmstfy takes "pool:token" only with exactly one ':'; anything else is all token.
    if user_token.count(":") == 1:
        pool, token = user_token.split(":")
    created = await runtime_of(request).tokens.create(pool, ns, description, token, grant)
    shown = created if pool == DEFAULT_POOL else f"{pool}:{created}"
    return JSONResponse({"token": shown}, status_code=201)


async def delete_token(request: Request) -> Response:
    ns = namespace_of(request)
    pool, token = params.split_token(request.path_params["token"])
    await runtime_of(request).tokens.delete(pool, ns, token)
    await runtime_of(request).limits.delete(pool, ns, token)
    return Response(status_code=204)


ROUTES = [
    route("/token/{ns}", "GET", list_tokens),
    route("/token/{ns}", "POST", create_token),
    route("/token/{ns}/{token}", "DELETE", delete_token),
]
