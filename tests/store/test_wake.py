"""The shared long-poll wake loop, on a real Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from lmstfy_py.store.wake import WakeHub

W1, W2 = "w/{ns}/a", "w/{ns}/b"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def hub(redis_url: str) -> AsyncIterator[WakeHub]:
    blocking = Redis.from_url(redis_url)
    hub = WakeHub(blocking)
    yield hub
    await hub.close()
    await blocking.aclose()


async def blocked_clients(redis: Redis) -> int:
    return sum(1 for c in await redis.client_list() if c["cmd"] in ("brpop", "blpop"))


async def test_many_waiters_share_one_brpop(redis: Redis, hub: WakeHub) -> None:
    waiters = [asyncio.create_task(hub.wait([W1, W2], 3)) for _ in range(300)]
    waiters += [asyncio.create_task(hub.wait([W2, W1], 3)) for _ in range(300)]  # same set, other order
    # Until the shared BRPOP is sent (a fixed 0.2 s was too short for a loaded machine), then one only.
    deadline = time.monotonic() + 5
    while await blocked_clients(redis) < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # time for a second BRPOP, were there one
    assert hub.waiting() == 600
    assert await blocked_clients(redis) == 1
    await redis.lpush(W2, "1")
    done, _ = await asyncio.wait(waiters, timeout=1, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1  # one token wakes one waiter
    await hub.close()
    started = time.monotonic()
    await asyncio.gather(*waiters)
    assert time.monotonic() - started < 0.5  # closing answers every waiter at once


async def test_a_waiter_times_out_and_the_loop_ends(redis: Redis, hub: WakeHub) -> None:
    started = time.monotonic()
    await hub.wait([W1], 0.3)
    assert 0.25 < time.monotonic() - started < 1.0
    assert hub.waiting() == 0


async def test_a_token_nobody_waits_for_is_put_back(redis: Redis, hub: WakeHub) -> None:
    waiter = asyncio.create_task(hub.wait([W1], 0.2))
    await asyncio.sleep(0.05)
    await waiter  # times out while the loop's BRPOP is still blocked
    await redis.lpush(W1, "1")  # the loop pops it with no waiter left ...
    await asyncio.sleep(0.2)
    assert await redis.llen(W1) == 1  # ... and gives it back for another process's waiter


async def test_wakes_come_in_order_of_waiting(redis: Redis, hub: WakeHub) -> None:
    order: list[int] = []

    async def wait(i: int) -> None:
        await hub.wait([W1], 3)
        order.append(i)

    tasks = []
    for i in range(3):
        tasks.append(asyncio.create_task(wait(i)))
        await asyncio.sleep(0.02)
    for _ in range(3):
        await redis.lpush(W1, "1")
        await asyncio.sleep(0.05)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


class Claim:
    """A waiter's claim (store/handover.py's Mailbox): a step is handing it jobs while set."""

    def __init__(self, claimed: bool) -> None:
        self.claimed = claimed


async def test_a_token_passes_over_a_claimed_waiter(redis: Redis, hub: WakeHub) -> None:
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    claimed = asyncio.create_task(hub.wait([W1], 3, first, Claim(True)))
    await asyncio.sleep(0.02)
    free = asyncio.create_task(hub.wait([W1], 3, second, Claim(False)))
    await asyncio.sleep(0.05)
    await redis.lpush(W1, "1")
    await asyncio.wait_for(free, 1)  # the later waiter, the longest-waiting one being claimed
    assert not claimed.done()
    first.set_result(None)  # its step handed it its jobs
    await claimed


async def test_a_token_with_every_waiter_claimed_is_kept_for_a_waiter_joining(redis: Redis, hub: WakeHub) -> None:
    claimed = asyncio.create_task(hub.wait([W1], 3, asyncio.get_running_loop().create_future(), Claim(True)))
    await asyncio.sleep(0.05)
    await redis.lpush(W1, "1")
    await asyncio.sleep(0.1)  # popped and put back, again and again: nobody may be woken by it
    assert not claimed.done()
    joining = asyncio.create_task(hub.wait([W1], 3))
    await asyncio.wait_for(joining, 1)  # the token, for the first waiter that is not claimed
    assert not claimed.done()
    claimed.cancel()
