"""The token check's cache (admin/tokens.py): what a burst of requests costs Redis, and that this
process's own changes apply at once.

Not tested: a lookup whose reply was read before one of this process's changes but handled
after it must not cache its answer (TokenStore._changes). Forcing that order takes control of
when replies are handled, which a real Redis does not give.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from lmstfy_py.admin.tokens import TokenStore

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
