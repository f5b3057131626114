"""The admin app: version, pools, info and tokens (and what tokens do on the data plane)."""

from __future__ import annotations

import httpx
import pytest

from lmstfy_py import __version__
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_admin_app, create_data_app
from tests.conftest import client_for
from tests.web.conftest import auth

LONG_TOKEN = "t" * 20


async def test_version(admin: httpx.AsyncClient) -> None:
    response = await admin.get("/version")
    assert response.status_code == 200
    assert response.json()["version"] == __version__
    assert set(response.json()) == {"version", "build_commit", "build_date"}
    assert response.headers["x-request-id"]


async def test_version_reads_the_build_from_the_environment(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMSTFY_BUILD_COMMIT", "abc123")
    monkeypatch.delenv("LMSTFY_BUILD_DATE", raising=False)
    async with client_for(create_admin_app(runtime)) as admin:
        body = (await admin.get("/version")).json()
    assert (body["build_commit"], body["build_date"]) == ("abc123", "unknown")


async def test_pools(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/pools")).json() == ["default"]


async def test_info_lists_namespaces_and_queues(admin: httpx.AsyncClient, data: httpx.AsyncClient) -> None:
    assert (await admin.get("/info")).json() == {}
    tokens: dict[str, str] = {}
    for ns, queue in (("a", "q2"), ("a", "q1"), ("b", "q")):
        tokens.setdefault(ns, (await admin.post(f"/token/{ns}", params={"description": "d"})).json()["token"])
        assert (await data.put(f"/api/{ns}/{queue}", headers=auth(tokens[ns]))).status_code == 201
    assert (await admin.get("/info")).json() == {"a": ["q1", "q2"], "b": ["q"]}
    assert (await admin.get("/info", params={"pool": "default"})).json() == {"a": ["q1", "q2"], "b": ["q"]}
    response = await admin.get("/info", params={"pool": "nope"})
    assert (response.status_code, response.json()) == (400, {"error": "pool not found"})


async def test_token_life_cycle(admin: httpx.AsyncClient, data: httpx.AsyncClient) -> None:
    assert (await admin.get("/token/ns")).json() == {"tokens": {}}
    response = await admin.post("/token/ns", params={"description": "first"})
    assert response.status_code == 201
    token = response.json()["token"]
    assert len(token) >= 20 and ":" not in token
    assert (await data.put("/api/ns/q", headers=auth(token))).status_code == 201

    assert (await admin.get("/token/ns")).json() == {"tokens": {token: "first"}}
    response = await admin.delete(f"/token/ns/{token}")
    assert response.status_code == 204
    assert (await admin.get("/token/ns")).json() == {"tokens": {}}
    response = await data.put("/api/ns/q", headers=auth(token))
    assert (response.status_code, response.json()) == (401, {"error": "invalid token"})


async def test_create_token_from_a_form_body(admin: httpx.AsyncClient) -> None:
    response = await admin.post("/token/ns", data={"description": "from form", "token": LONG_TOKEN})
    assert (response.status_code, response.json()) == (201, {"token": LONG_TOKEN})
    assert (await admin.get("/token/ns")).json() == {"tokens": {LONG_TOKEN: "from form"}}


async def test_create_token_with_a_default_pool_prefix(admin: httpx.AsyncClient) -> None:
    response = await admin.post("/token/ns", params={"description": "d", "token": f"default:{LONG_TOKEN}"})
    assert (response.status_code, response.json()) == (201, {"token": LONG_TOKEN})


@pytest.mark.parametrize(
    ("path", "query", "error"),
    [
        ("/token/ns", {}, "invalid description"),
        ("/token/ns", {"description": ""}, "invalid description"),
        ("/token/ns", {"description": "d", "token": "t" * 19}, "the user token was too short"),
        ("/token/ns", {"description": "d", "pool": "nope"}, "pool not found"),
        ("/token/ns", {"description": "d", "token": f"nope:{LONG_TOKEN}"}, "pool not found"),
        ("/token/n.s", {"description": "d"}, "namespace name contains forbidden characters"),
        ("/token/" + "n" * 256, {"description": "d"}, "the namespace name was too long"),
    ],
)
async def test_create_token_errors(admin: httpx.AsyncClient, path: str, query: dict[str, str], error: str) -> None:
    response = await admin.post(path, params=query)
    assert (response.status_code, response.json()) == (400, {"error": error})


async def test_duplicate_token(admin: httpx.AsyncClient) -> None:
    assert (await admin.post("/token/ns", params={"description": "d", "token": LONG_TOKEN})).status_code == 201
    response = await admin.post("/token/ns", params={"description": "d", "token": LONG_TOKEN})
    assert (response.status_code, response.json()) == (400, {"error": "the token has already existed"})


async def test_token_routes_refuse_an_unknown_pool(admin: httpx.AsyncClient) -> None:
    response = await admin.get("/token/ns", params={"pool": "nope"})
    assert (response.status_code, response.json()) == (400, {"error": "pool not found"})
    response = await admin.delete(f"/token/ns/nope:{LONG_TOKEN}")
    assert (response.status_code, response.json()) == (400, {"error": "pool not found"})


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/nope"),
        ("POST", "/version"),
        ("PUT", "/token/ns"),
        ("GET", "/token/ns/x"),
        ("GET", "/api/ns/q"),
    ],
)
async def test_admin_unknown_routes(admin: httpx.AsyncClient, method: str, path: str) -> None:
    response = await admin.request(method, path)
    assert (response.status_code, response.json()) == (404, {"error": "api not found"})
    assert response.headers["x-request-id"]


# -- a second pool ----------------------------------------------------------------------


async def test_tokens_of_another_pool(two_pools: Runtime) -> None:
    async with client_for(create_admin_app(two_pools)) as admin, client_for(create_data_app(two_pools)) as data:
        assert (await admin.get("/pools")).json() == ["default", "other"]
        response = await admin.post("/token/ns", params={"description": "d", "pool": "other"})
        token = response.json()["token"]
        assert response.status_code == 201 and token.startswith("other:")
        response = await admin.post("/token/ns", params={"description": "d", "token": f"other:{LONG_TOKEN}"})
        assert response.json() == {"token": f"other:{LONG_TOKEN}"}

        assert (await data.put("/api/ns/q", headers=auth(token))).status_code == 201
        bare = token.removeprefix("other:")
        response = await data.put("/api/ns/q", headers=auth(bare))  # the same token in the default pool
        assert (response.status_code, response.json()) == (401, {"error": "invalid token"})

        listed = (await admin.get("/token/ns", params={"pool": "other"})).json()["tokens"]
        assert set(listed) == {bare, LONG_TOKEN}
        assert (await admin.get("/token/ns")).json() == {"tokens": {}}
        assert (await admin.delete(f"/token/ns/{token}")).status_code == 204
        assert set((await admin.get("/token/ns", params={"pool": "other"})).json()["tokens"]) == {LONG_TOKEN}
