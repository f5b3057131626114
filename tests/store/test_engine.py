"""The engine's job life cycle against real Redis (standalone and cluster)."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator

import pytest

from lmstfy_py import ids
from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys, pools
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import NewJob, QueueStats

NS, Q = "ns1", "q1"


async def keyspace(engine: Engine) -> set[str]:
    """Every key of the test namespace (all in one slot, so one node answers)."""
    pattern = f"*{{{NS}}}*"
    found: set[str] = set()
    async for key in engine.redis.scan_iter(match=pattern):
        found.add(key.decode())
    return found


async def eventually(check, timeout: float = 3.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.02)


async def test_publish_consume_ack_leaves_nothing(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"hello"))).job_id
    assert ids.is_valid(job_id) and len(job_id) == 26
    assert await engine.size(NS, Q) == 1

    [job] = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1)
    assert (job.job_id, job.body, job.queue, job.remain_tries, job.attributes) == (job_id, b"hello", Q, 0, None)
    assert 86_399 <= job.ttl <= 86_400
    assert await engine.size(NS, Q) == 0
    assert await engine.timer_size(NS) == 1  # reserved until ACK or ttr

    assert await engine.ack(NS, Q, job_id) is True
    assert await engine.timer_size(NS) == 0
    # Only the queue's own keys stay (its registry entry and counts): nothing of the job.
    assert await keyspace(engine) <= {keys.queues(NS), keys.meta(NS, Q)}
    assert await engine.consume(NS, [Q], 60_000, 0, 1) == []
    with pytest.raises(NotFound, match="job not found"):
        await engine.peek_job(NS, Q, job_id)


async def test_a_consume_acks_first_then_waits(engine: Engine) -> None:
    done = [(await engine.publish(NS, queue, NewJob(b"x"))).job_id for queue in (Q, "q2", Q)]
    assert len(await engine.consume(NS, [Q, "q2"], 60_000, 0, 3)) == 3
    waiting = asyncio.create_task(
        engine.consume(NS, [Q], 60_000, timeout_ms=3000, count=1, acks={Q: [done[0], done[2]], "q2": [done[1]]})
    )
    for _ in range(100):  # ACKed before the long-poll waits, not when it answers
        if await engine.timer_size(NS) == 0:
            break
        await asyncio.sleep(0.01)
    assert await engine.timer_size(NS) == 0 and not waiting.done()
    assert await keyspace(engine) <= {keys.queues(NS), keys.meta(NS, Q), keys.meta(NS, "q2"), keys.wake(NS, Q)}
    later = (await engine.publish(NS, Q, NewJob(b"later"))).job_id
    assert [job.job_id for job in await waiting] == [later]


async def test_ack_of_a_ready_job_removes_its_element(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"x"))).job_id
    assert await engine.ack(NS, Q, job_id)
    assert await engine.size(NS, Q) == 0
    assert await engine.ack(NS, Q, job_id) is False


async def test_delayed_job_becomes_ready_on_time(engine: Engine, pump: Pump) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"later", delay_ms=400))).job_id
    assert ids.delay_seconds(job_id) == 0  # whole seconds, as lmstfy
    assert await engine.consume(NS, [Q], 60_000, 0, 1) == []
    started = time.monotonic()
    [job] = await engine.consume(NS, [Q], 60_000, timeout_ms=3000, count=1)
    waited = time.monotonic() - started
    assert job.job_id == job_id
    assert 0.3 < waited < 1.5


async def test_a_delay_already_past_publishes_the_job_ready(engine: Engine) -> None:
    """A due time counted down before the publish may be behind by then (test_handover's once)."""
    job_id = (await engine.publish(NS, Q, NewJob(b"late", delay_ms=-5))).job_id
    assert ids.delay_seconds(job_id) == 0
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert (job.job_id, job.body) == (job_id, b"late")


async def test_ttr_expiry_redelivers_then_buries(engine: Engine, pump: Pump) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"retry me", tries=2))).job_id
    [first] = await engine.consume(NS, [Q], ttr_ms=200, timeout_ms=0, count=1)
    assert first.remain_tries == 1
    [second] = await engine.consume(NS, [Q], ttr_ms=200, timeout_ms=3000, count=1)
    assert (second.job_id, second.remain_tries) == (job_id, 0)

    async def buried() -> bool:
        return (await engine.dead_letter(NS, Q)).size == 1

    assert await eventually(buried)
    head = await engine.dead_letter(NS, Q)
    assert head.head == job_id
    assert await engine.redis.pttl(keys.job(NS, Q, job_id)) == -1  # dead jobs never expire
    assert await engine.consume(NS, [Q], 200, 0, 1) == []


async def test_respawn_makes_dead_jobs_consumable_with_new_ttl(engine: Engine, pump: Pump) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"d"))).job_id
    await engine.consume(NS, [Q], ttr_ms=100, timeout_ms=0, count=1)

    async def buried() -> bool:
        return await engine.dead_letter_size(NS, Q) == 1

    assert await eventually(buried)
    assert await engine.respawn(NS, Q, limit=10, ttl_ms=30_000) == 1
    assert await engine.dead_letter_size(NS, Q) == 0
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert (job.job_id, job.remain_tries) == (job_id, 0)
    assert 29 <= job.ttl <= 30


async def test_delete_dead_deletes_dead_jobs_and_data(engine: Engine, pump: Pump) -> None:
    ids_ = [(await engine.publish(NS, Q, NewJob(b"%d" % i))).job_id for i in range(3)]
    await engine.consume(NS, [Q], ttr_ms=50, timeout_ms=0, count=3)

    async def buried() -> bool:
        return await engine.dead_letter_size(NS, Q) == 3

    assert await eventually(buried)
    dead = await engine.dead_letter_ids(NS, Q, 10)  # oldest first; one due time, so any order of the three
    assert sorted(dead) == sorted(ids_)
    assert (await engine.dead_letter(NS, Q)).head == dead[0]
    assert await engine.delete_dead(NS, Q, limit=2) == 2
    assert await engine.dead_letter_ids(NS, Q, 10) == dead[2:]
    for job_id in dead[:2]:
        assert not await engine.redis.exists(keys.job(NS, Q, job_id))


async def test_expired_job_is_never_delivered(engine: Engine) -> None:
    await engine.publish(NS, Q, NewJob(b"short", ttl_ms=100))
    await asyncio.sleep(0.2)
    assert await engine.consume(NS, [Q], 60_000, 0, 1) == []
    assert await engine.size(NS, Q) == 0  # the stale element was dropped on the way


async def test_expired_delayed_job_is_dropped_by_the_pump(engine: Engine, pump: Pump) -> None:
    await engine.publish(NS, Q, NewJob(b"gone", ttl_ms=100, delay_ms=150))
    await asyncio.sleep(0.4)
    assert await engine.timer_size(NS) == 0
    assert await engine.size(NS, Q) == 0


async def test_multi_queue_consume_prefers_queues_listed_first(engine: Engine) -> None:
    await engine.publish(NS, "low", NewJob(b"l1"))
    await engine.publish(NS, "high", NewJob(b"h1"))
    await engine.publish(NS, "low", NewJob(b"l2"))
    jobs = await engine.consume(NS, ["high", "low"], 60_000, 0, count=2)
    assert [(j.queue, j.body) for j in jobs] == [("high", b"h1"), ("low", b"l1")]
    [last] = await engine.consume(NS, ["high", "low"], 60_000, 0, count=5)
    assert last.body == b"l2"


async def test_fifo_within_a_queue(engine: Engine) -> None:
    for i in range(5):
        await engine.publish(NS, Q, NewJob(b"%d" % i))
    jobs = await engine.consume(NS, [Q], 60_000, 0, count=100)
    assert [j.body for j in jobs] == [b"0", b"1", b"2", b"3", b"4"]


async def test_long_poll_wakes_on_publish(engine: Engine) -> None:
    waiter = asyncio.create_task(engine.consume(NS, ["a", Q], 60_000, timeout_ms=5000, count=1))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    job_id = (await engine.publish(NS, Q, NewJob(b"wake"))).job_id
    [job] = await asyncio.wait_for(waiter, 2)
    assert job.job_id == job_id
    assert time.monotonic() - started < 0.5


async def test_long_poll_times_out_empty(engine: Engine) -> None:
    started = time.monotonic()
    assert await engine.consume(NS, [Q], 60_000, timeout_ms=300, count=1) == []
    assert 0.25 < time.monotonic() - started < 1.5


async def test_many_waiters_each_get_one_job(engine: Engine) -> None:
    waiters = [asyncio.create_task(engine.consume(NS, [Q], 60_000, 3000, 1)) for _ in range(5)]
    await asyncio.sleep(0.1)
    published = {(await engine.publish(NS, Q, NewJob(b"%d" % i))).job_id for i in range(5)}
    results = await asyncio.wait_for(asyncio.gather(*waiters), 3)
    assert {job.job_id for [job] in results} == published


async def test_peek_queue_and_job(engine: Engine) -> None:
    with pytest.raises(NotFound, match="the queue is empty"):
        await engine.peek_queue(NS, Q)
    first = (await engine.publish(NS, Q, NewJob(b"1", tries=3))).job_id
    await engine.publish(NS, Q, NewJob(b"2"))
    job = await engine.peek_queue(NS, Q)
    assert (job.job_id, job.body, job.remain_tries) == (first, b"1", 3)
    assert await engine.size(NS, Q) == 2  # peek consumes nothing
    assert (await engine.peek_job(NS, Q, first)).job.body == b"1"


async def test_peek_skips_expired_jobs(engine: Engine) -> None:
    await engine.publish(NS, Q, NewJob(b"old", ttl_ms=50))
    alive = (await engine.publish(NS, Q, NewJob(b"new"))).job_id
    await asyncio.sleep(0.1)
    assert (await engine.peek_queue(NS, Q)).job_id == alive


async def test_attributes_make_a_versioned_id(engine: Engine) -> None:
    job_id = (await engine.publish(NS, Q, NewJob(b"a", attributes={"k": "v"}))).job_id
    assert len(job_id) == 27 and job_id[0] == "1"
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert job.attributes == {"k": "v"}


async def test_republish_replaces_atomically(engine: Engine) -> None:
    old = (await engine.publish(NS, Q, NewJob(b"v1"))).job_id
    await engine.consume(NS, [Q], 60_000, 0, 1)
    new = (await engine.publish(NS, Q, NewJob(b"v2"), replaces=old)).job_id
    assert await engine.timer_size(NS) == 0  # the old reservation went with it
    [job] = await engine.consume(NS, [Q], 60_000, 0, 1)
    assert (job.job_id, job.body) == (new, b"v2")


async def test_publish_many_is_one_batch(engine: Engine) -> None:
    jobs = [NewJob(b"%d" % i) for i in range(64)]
    job_ids = [p.job_id for p in await engine.publish_many(NS, Q, jobs)]
    assert len(set(job_ids)) == 64
    assert await engine.size(NS, Q) == 64


async def test_destroy_drops_ready_jobs_and_data_in_chunks(engine: Engine) -> None:
    for _ in range(40):  # 2560 jobs: more than one script call's chunk
        await engine.publish_many(NS, Q, [NewJob(b"x")] * 64)
    assert await engine.destroy(NS, Q) == 2560
    assert await engine.size(NS, Q) == 0
    assert await keyspace(engine) <= {keys.queues(NS), keys.meta(NS, Q)}


async def test_scripts_reload_after_flush(engine: Engine) -> None:
    await engine.redis.script_flush()
    await engine.publish(NS, Q, NewJob(b"after flush"))
    await engine.redis.script_flush()
    await engine.publish_many(NS, Q, [NewJob(b"a"), NewJob(b"b")])
    await engine.redis.script_flush()
    assert len(await engine.consume(NS, [Q], 60_000, 0, 10)) == 3


async def test_registry_knows_namespaces_and_queues(engine: Engine) -> None:
    await engine.publish(NS, "b", NewJob(b""))
    await engine.publish(NS, "a", NewJob(b"", delay_ms=10_000))
    assert NS in await engine.namespaces()
    assert await engine.queues(NS) == ["a", "b"]


async def test_a_purge_racing_publishes_of_another_process_leaves_no_orphan_job(
    engine: Engine, pool_config: PoolConfig
) -> None:
    """Every job left after a purge still waits somewhere (timer, ready or dead list): a job hash
    without its element would never be delivered, and with ttl 0 never expire."""
    other_process = pools.engine("default", pool_config)
    stop = asyncio.Event()

    async def publish_delayed() -> None:
        while not stop.is_set():
            await other_process.publish_many(NS, Q, [NewJob(b"x", ttl_ms=0, delay_ms=60_000)] * 4)

    publishing = [asyncio.create_task(publish_delayed()) for _ in range(4)]
    try:
        for _ in range(30):
            await engine.purge_namespace(NS)
            await asyncio.sleep(0)
    finally:
        stop.set()
        await asyncio.gather(*publishing)
        await other_process.close()
    assert await orphan_jobs(engine, NS) == []


async def orphan_jobs(engine: Engine, ns: str) -> list[str]:
    """The job hashes of `ns` that no timer member and no list element points to."""
    waiting = {keys.unpack_element(e)[1] for q in await engine.queues(ns) for e in await list_elements(engine, ns, q)}
    waiting |= {timer_member_id(m) for m in await engine.redis.zrange(keys.timer(ns), 0, -1)}
    found = [key.decode() async for key in scan_keys(engine, keys.job_prefix(ns) + "*")]
    return [key for key in found if key.rsplit("/", 1)[1] not in waiting]


async def list_elements(engine: Engine, ns: str, queue: str) -> list[bytes]:
    elements: list[bytes] = []
    for key in (keys.ready(ns, queue), keys.dead(ns, queue)):
        elements += await engine.redis.lrange(key, 0, -1)
    return elements


def timer_member_id(member: bytes) -> str:
    at = 0
    for _ in range(2):  # namespace, queue: each a u16 length and its bytes
        (length,) = struct.unpack_from("<H", member, at)
        at += 2 + length
    _, length = struct.unpack_from("<HH", member, at)
    return member[at + 4 : at + 4 + length].decode()


async def scan_keys(engine: Engine, pattern: str) -> AsyncIterator[bytes]:
    async for key in engine.redis.scan_iter(match=pattern, count=1000):
        yield key


async def test_counts_stay_right_when_jobs_expire_on_the_timer(engine: Engine, pump: Pump) -> None:
    """A delayed or reserved job whose ttl ends on the timer leaves the delayed/reserved count all the
    same: its timer member says which count it was in (a reservation's ends with "X")."""
    await engine.publish(NS, Q, NewJob(b"reserved", ttl_ms=200, tries=2))
    await engine.consume(NS, [Q], ttr_ms=400, timeout_ms=0, count=1)
    await engine.publish(NS, "other", NewJob(b"delayed", ttl_ms=200, delay_ms=400))
    assert (await engine.stats(NS, Q)).reserved == 1 and (await engine.stats(NS, "other")).delayed == 1

    async def all_gone() -> bool:
        return await engine.timer_size(NS) == 0

    assert await eventually(all_gone)
    assert (await engine.stats(NS, Q), await engine.stats(NS, "other")) == (
        QueueStats(ready=0, delayed=0, reserved=0, dead=0, paused=False),
        QueueStats(ready=0, delayed=0, reserved=0, dead=0, paused=False),
    )
    assert await orphan_jobs(engine, NS) == []


async def test_a_timer_member_of_an_older_version_is_still_moved(engine: Engine, pump: Pump) -> None:
    """Members stored before reservations were marked ("X") are moved as before: to ready."""
    job_id = (await engine.publish(NS, Q, NewJob(b"old", tries=2))).job_id
    assert len(await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1)) == 1
    # Rewrite the reservation as an older lmstfy-py stored it: no "X", state "T".
    await engine.redis.zrem(keys.timer(NS), keys.pack_timer_member(NS, Q, 1, job_id, reserved=True))
    await engine.redis.zadd(keys.timer(NS), {keys.pack_timer_member(NS, Q, 1, job_id): now_ms() + 50})
    await engine.redis.hset(keys.job(NS, Q, job_id), "s", "T")
    await engine.redis.zadd(keys.DUE_INDEX, {NS: now_ms() + 50})
    [again] = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=3000, count=1)
    assert (again.job_id, again.remain_tries) == (job_id, 0)


async def test_a_business_id_used_again_after_its_ttl_is_one_job(engine: Engine) -> None:
    """The first job's hash expired by its ttl and left its ready element: the id's next job is
    delivered once, not once per element, and its ACK leaves nothing reserved."""
    await engine.publish(NS, Q, NewJob(b"old", job_id="order-1", ttl_ms=200))
    await asyncio.sleep(0.4)
    await engine.publish(NS, Q, NewJob(b"new", job_id="order-1"))
    got = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=2)
    assert [(job.job_id, job.body) for job in got] == [("order-1", b"new")]
    await engine.ack(NS, Q, "order-1")
    assert await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=2) == []
    assert (await engine.stats(NS, Q)).reserved == 0


async def test_an_expired_jobs_reservation_leaves_the_next_job_of_its_id_alone(engine: Engine, pump: Pump) -> None:
    """The first job expired while reserved: at its ttr the pump must not take the id's next job
    for it (it sent that one to the dead letter, which was then delivered from its ready element too)."""
    await engine.publish(NS, Q, NewJob(b"old", job_id="order-2", ttl_ms=200))
    assert len(await engine.consume(NS, [Q], ttr_ms=800, timeout_ms=0, count=1)) == 1
    await asyncio.sleep(0.4)  # its hash is gone; its reservation waits on the timer
    await engine.publish(NS, Q, NewJob(b"new", job_id="order-2"))

    async def ttr_passed() -> bool:
        return await engine.timer_size(NS) == 0

    assert await eventually(ttr_passed)
    assert (await engine.stats(NS, Q)).dead == 0
    got = await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=2)
    assert [(job.job_id, job.body, job.remain_tries) for job in got] == [("order-2", b"new", 0)]
