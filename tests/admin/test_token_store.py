"""The token check's cache (admin/tokens.py): what a burst of requests costs Redis, and that this
process's own changes apply at once; a token's grant (SPEC 15 scopes and queue patterns) stored,
read and deleted with it.

Not tested: a lookup whose reply was read before one of this process's changes but handled
after it must not cache its answer (TokenStore._changes). Forcing that order takes control of
when replies are handled, which a real Redis does not give.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from lmstfy_py.admin import grants
from lmstfy_py.admin.tokens import TokenStore
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.store import keys

NS = "tokens"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def hexists_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_hexists", {}).get("calls", 0))


async def test_a_burst_of_requests_with_one_token_costs_one_lookup(redis: Redis) -> None:
    token = await TokenStore(redis, ["default"]).create("default", NS, "burst")
    checking = TokenStore(redis, ["default"])  # another process: nothing cached
    before = await hexists_calls(redis)
    answers = await asyncio.gather(*(checking.exists("default", NS, token) for _ in range(500)))
    unknown = await asyncio.gather(*(checking.exists("default", NS, "no-such-token") for _ in range(500)))
    assert all(answers) and not any(unknown)
    assert await hexists_calls(redis) - before == 2


async def test_a_request_that_leaves_does_not_fail_the_others(redis: Redis) -> None:
    token = await TokenStore(redis, ["default"]).create("default", NS, "leaving")
    checking = TokenStore(redis, ["default"])
    leaving = asyncio.create_task(checking.exists("default", NS, token))
    staying = asyncio.create_task(checking.exists("default", NS, token))
    await asyncio.sleep(0)
    leaving.cancel()
    assert await staying is True
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def test_this_process_sees_its_own_changes_at_once_despite_the_cache(redis: Redis) -> None:
    store = TokenStore(redis, ["default"])
    token = "t" * 24
    assert await store.exists("default", NS, token) is False  # "no" is cached too
    await store.create("default", NS, "mine", token)
    assert await store.exists("default", NS, token) is True
    await store.delete("default", NS, token)
    assert await store.exists("default", NS, token) is False
    await store.create("default", NS, "mine", token)
    assert await store.exists("default", NS, token) is True
    await store.delete_namespace("default", NS)
    assert await store.exists("default", NS, token) is False


async def test_redis_errors_reach_every_waiter(redis_url: str) -> None:
    unreachable = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    store = TokenStore(unreachable, ["default"])
    answers = await asyncio.gather(*(store.exists("default", NS, "t") for _ in range(5)), return_exceptions=True)
    assert all(type(answer).__name__ == "ConnectionError" for answer in answers), answers
    assert len({id(answer) for answer in answers}) == 5  # each its own exception
    await unreachable.aclose()


# -- scopes and queue patterns (SPEC 15) ------------------------------------------------------------


async def test_a_scoped_token_is_stored_beside_lmstfys_hash_and_deleted_with_it(redis: Redis) -> None:
    store = TokenStore(redis, ["default"])
    grant = grants.parse("consume,read", "orders-*")
    token = await store.create("default", NS, "workers", grant=grant)
    plain = await store.create("default", NS, "plain")
    # lmstfy reads its hash unchanged: token -> description, nothing else in it.
    assert await redis.hgetall(keys.tokens("default", NS)) == {token.encode(): b"workers", plain.encode(): b"plain"}
    assert await redis.hkeys(keys.token_grants("default", NS)) == [token.encode()]
    found = await TokenStore(redis, ["default"]).grant("default", NS, token)
    assert found is not None and found.as_json() == {"scope": ["consume", "read"], "queues": ["orders-*"]}
    assert await TokenStore(redis, ["default"]).grant("default", NS, plain) is grants.UNRESTRICTED
    with pytest.raises(InvalidParameter):  # an existing token keeps its grant
        await store.create("default", NS, "again", token, grants.UNRESTRICTED)
    assert (await store.grants("default", NS))[token].as_json() == found.as_json()

    await store.delete("default", NS, token)
    assert await redis.hlen(keys.token_grants("default", NS)) == 0
    await store.create("default", NS, "scoped again", token, grant)
    assert await store.delete_namespace("default", NS) == 2
    assert not await redis.exists(keys.tokens("default", NS), keys.token_grants("default", NS))


async def test_a_burst_with_a_scoped_token_costs_one_lookup_too(redis: Redis) -> None:
    token = await TokenStore(redis, ["default"]).create("default", NS, "burst", grant=grants.parse("publish", None))
    checking = TokenStore(redis, ["default"])
    before = await hexists_calls(redis)
    found = await asyncio.gather(*(checking.grant("default", NS, token) for _ in range(500)))
    assert all(grant is found[0] and grant is not None and not grant.unrestricted for grant in found)
    assert await hexists_calls(redis) - before == 1


async def test_a_token_lmstfy_made_has_every_scope(redis: Redis) -> None:
    await redis.hset(keys.tokens("default", NS), "made-by-lmstfy", "")
    assert await TokenStore(redis, ["default"]).grant("default", NS, "made-by-lmstfy") is grants.UNRESTRICTED


NAMES = ["orders-1", "orders-", "Orders-1", "my-orders", "x", "xy", "xyz", "a1", "b2", "!", "a-b_c"]
PATTERNS = ["orders-*", "x?", "[a-c]1", "[!a-c]2", "*", "a-b_c", "[]", "!"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_queue_patterns_match_as_fnmatchcase_on_the_whole_name(pattern: str) -> None:
    grant = grants.parse(None, pattern)
    assert [grant.allows(grants.MANAGE, name) for name in NAMES] == [fnmatch.fnmatchcase(n, pattern) for n in NAMES]


def test_a_route_needs_every_scope_it_names() -> None:
    grant = grants.parse("publish", None)
    assert grant.allows(grants.PUBLISH, "q") and not grant.allows(grants.PUBLISH | grants.CONSUME, "q")
    assert grants.UNRESTRICTED.allows(grants.PUBLISH | grants.CONSUME | grants.READ | grants.MANAGE, "any")
