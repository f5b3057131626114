"""Serving the jobs lmstfy left in a Redis, in place (SPEC section 12), on a real Redis written
exactly as lmstfy 1.0.10 writes it (tests/fixtures/lmstfy_layout.py): every job consumed once with its
id, data, ttl and tries; lmstfy's due timer members made ready on time; its dead letters seen
and respawned; its reservations ACKed through lmstfy-py; lmstfy itself still consuming the same
lists meanwhile; and lmstfy's keys gone once every job has moved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys, pools
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.lmstfy_format import LmstfyLayout, LmstfyMover
from lmstfy_py.store.pools import Pools
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import Job, NewJob, SettingsChange
from tests.fixtures.lmstfy_layout import TIMER_SET, LmstfyPool, dead_key, job_key, ready_key
from tests.store.conftest import events_kept

NS = "shop"


@pytest.fixture
def lmstfy(redis_url: str) -> Iterator[LmstfyPool]:
    """lmstfy 1.0.10 writing to the test Redis (synchronous, as a separate lmstfy server would)."""
    client = redis.Redis.from_url(redis_url)
    yield LmstfyPool(client)
    client.close()


@pytest.fixture
async def engine(redis_url: str) -> AsyncIterator[Engine]:
    engine = pools.engine("default", PoolConfig("default", url=redis_url, format="lmstfy"))
    yield engine
    await engine.close()


async def nothing_to_adopt() -> None:
    pass


@pytest.fixture
def layout(engine: Engine) -> LmstfyLayout:
    return LmstfyLayout(engine)


@pytest.fixture
def store(engine: Engine, layout: LmstfyLayout) -> Engine:
    """The pool's Engine serving lmstfy's layout too."""
    return engine.with_layout(layout)


@pytest.fixture
async def mover(layout: LmstfyLayout) -> AsyncIterator[LmstfyMover]:
    running = LmstfyMover(layout, nothing_to_adopt)
    running.start()
    yield running
    await running.stop()


@pytest.fixture
async def pump(engine: Engine) -> AsyncIterator[Pump]:
    running = Pump(engine)
    running.start()
    yield running
    await running.stop()


async def consume_all(store: Engine, queues: list[str], ttr_ms: int = 60_000) -> list[Job]:
    got: list[Job] = []
    while jobs := await store.consume(NS, queues, ttr_ms, 0, 7):
        got += jobs
    return got


def lmstfy_keys(client: redis.Redis) -> list[bytes]:
    """lmstfy's job data, lists and timer left (its registry hashes aside: lmstfy never empties them)."""
    found = [key for key in client.keys("*") if b"{" not in key]  # lmstfy-py's keys have a hash tag
    return sorted(key for key in found if key == TIMER_SET.encode() or key[:2] in (b"j/", b"q/", b"d/"))


async def test_every_ready_job_is_consumed_once_with_its_id_data_ttl_and_tries(
    store: Engine, lmstfy: LmstfyPool
) -> None:
    published = {}
    for i in range(25):
        queue = "a" if i % 2 else "b"
        body = b"\x00\xffjob %d" % i
        published[lmstfy.publish(NS, queue, body, ttl=600, tries=3)] = (queue, body)
    jobs = await consume_all(store, ["a", "b"])
    assert sorted(job.job_id for job in jobs) == sorted(published)  # each once, none lost
    # The first queue listed wins, as in any multi-queue consume; each queue in lmstfy's order.
    assert [job.queue for job in jobs] == ["a"] * 12 + ["b"] * 13
    for job in jobs:
        assert (job.queue, job.body) == published[job.job_id]
        assert 598 <= job.ttl <= 600 and job.remain_tries == 2 and job.attempts == 1
        assert 0 <= job.elapsed_ms < 5000  # counted from lmstfy's publish, the time in its id
    info = await store.peek_job(NS, "a", jobs[0].job_id)
    assert info.state == "reserved"  # it lives in lmstfy-py's layout now
    assert await store.ack_many(NS, "a", [job.job_id for job in jobs if job.queue == "a"]) == 12
    assert await store.ack_many(NS, "b", [job.job_id for job in jobs if job.queue == "b"]) == 13
    assert lmstfy_keys(lmstfy.client) == []  # nothing of lmstfy's layout is left


async def test_a_job_whose_data_expired_under_lmstfy_is_skipped(store: Engine, lmstfy: LmstfyPool) -> None:
    gone = lmstfy.publish(NS, "q", b"old", ttl=60)
    kept = lmstfy.publish(NS, "q", b"new", ttl=60)
    lmstfy.client.delete(job_key(NS, "q", gone))  # its ttl ended
    assert [job.job_id for job in await consume_all(store, ["q"])] == [kept]


async def test_jobs_published_now_go_to_lmstfy_pys_layout_and_come_after_lmstfys(
    store: Engine, lmstfy: LmstfyPool
) -> None:
    old = lmstfy.publish(NS, "q", b"from lmstfy")
    new = (await store.publish(NS, "q", NewJob(b"from lmstfy-py"))).job_id
    assert lmstfy.ready(NS, "q")[0].job_id == old and len(lmstfy.ready(NS, "q")) == 1  # nothing added there
    assert await store.size(NS, "q") == 2
    assert (await store.peek_queue(NS, "q")).job_id == old
    assert [job.job_id for job in await consume_all(store, ["q"])] == [old, new]


async def test_a_versioned_job_of_a_later_lmstfy_keeps_its_attributes(store: Engine, lmstfy: LmstfyPool) -> None:
    job_id = lmstfy.publish(NS, "q", b"\x01body", versioned=True, attributes={"trace": "t-1", "kind": "order"})
    assert len(job_id) == 27
    [job] = await consume_all(store, ["q"])
    assert (job.job_id, job.body, job.attributes) == (job_id, b"\x01body", {"kind": "order", "trace": "t-1"})


async def test_a_paused_queue_keeps_lmstfys_jobs_waiting(store: Engine, lmstfy: LmstfyPool) -> None:
    job_id = lmstfy.publish(NS, "q", b"x")
    await store.pause(NS, "q", True)
    assert await consume_all(store, ["q"]) == []
    await store.pause(NS, "q", False)
    assert [job.job_id for job in await consume_all(store, ["q"])] == [job_id]


async def test_a_long_poll_gets_a_job_lmstfy_publishes_meanwhile(store: Engine, lmstfy: LmstfyPool) -> None:
    """A rolling switch: lmstfy still publishes to its own list, which wakes nobody of ours."""
    waiting = asyncio.create_task(store.consume(NS, ["q"], 60_000, 5_000, 1))
    await asyncio.sleep(0.2)
    job_id = await asyncio.to_thread(lmstfy.publish, NS, "q", b"late")
    started = time.monotonic()
    [job] = await asyncio.wait_for(waiting, 5)
    assert job.job_id == job_id and time.monotonic() - started < 1.0  # LEGACY_SLICE_S: 0.5 s


async def test_lmstfy_and_lmstfy_py_consuming_the_same_lists_take_each_job_once(
    store: Engine, lmstfy: LmstfyPool
) -> None:
    published = {lmstfy.publish(NS, "q", b"%d" % i, tries=2) for i in range(400)}

    def lmstfy_consumer() -> list[str]:
        taken = []
        while (job := lmstfy.reserve(NS, ["q"], ttr=60)) is not None:
            taken.append(job.job_id)
        return taken

    with ThreadPoolExecutor(2) as threads:
        theirs = [asyncio.get_running_loop().run_in_executor(threads, lmstfy_consumer) for _ in range(2)]
        ours = await asyncio.gather(*(consume_all(store, ["q"]) for _ in range(4)))
        taken_by_lmstfy = [job_id for part in await asyncio.gather(*theirs) for job_id in part]
    taken_here = [job.job_id for part in ours for job in part]
    assert taken_here and taken_by_lmstfy  # both really took part
    assert sorted(taken_here + taken_by_lmstfy) == sorted(published)  # each job once, none lost


async def test_lmstfys_due_timer_members_become_ready_on_time(
    store: Engine, lmstfy: LmstfyPool, mover: LmstfyMover
) -> None:
    now = int(time.time())
    delayed = lmstfy.publish(NS, "q", b"later", ttl=600, delay=2, tries=3, now=now)
    # A job lmstfy delivered whose reservation ends without an ACK: it comes back with the tries left.
    lmstfy.publish(NS, "q", b"taken", ttl=600, tries=3, now=now)
    taken = lmstfy.reserve(NS, ["q"], ttr=1, now=now)
    assert taken is not None and taken.remaining_tries == 2
    # One ACKed meanwhile (through lmstfy): its member comes due and is dropped, as lmstfy does.
    lmstfy.publish(NS, "q", b"done", ttl=600, now=now)
    done = lmstfy.reserve(NS, ["q"], ttr=1, now=now)
    assert done is not None
    lmstfy.ack(NS, "q", done.job_id)

    [back] = await store.consume(NS, ["q"], 60_000, 3_000, 5)
    assert (back.job_id, back.body, back.remain_tries) == (taken.job_id, b"taken", 1)
    assert time.time() < now + 1 + 1.2  # lmstfy's score is a whole second: due at now + 1
    [due] = await store.consume(NS, ["q"], 60_000, 3_000, 5)
    assert (due.job_id, due.body, due.remain_tries) == (delayed, b"later", 2)
    assert now + 2 <= time.time() < now + 2 + 1.2
    assert await store.consume(NS, ["q"], 60_000, 1_500, 5) == []  # the ACKed one never comes
    assert lmstfy.client.zcard(TIMER_SET) == 0


async def test_a_reservation_out_of_tries_goes_to_the_dead_letter(
    store: Engine, lmstfy: LmstfyPool, mover: LmstfyMover
) -> None:
    now = int(time.time())
    job_id = lmstfy.publish(NS, "q", b"last try", tries=1, now=now)
    assert lmstfy.reserve(NS, ["q"], ttr=1, now=now) is not None

    async def dead() -> int:
        return await store.dead_letter_size(NS, "q")

    deadline = time.monotonic() + 4
    while not await dead():
        assert time.monotonic() < deadline, "never buried"
        await asyncio.sleep(0.05)
    page = await store.dead_page(NS, "q", 10, None)
    assert [(job.job_id, job.body, job.last_error) for job in page.jobs] == [
        (job_id, b"last try", "lmstfy: no tries left")
    ]


async def test_lmstfys_dead_letter_is_seen_behind_ours_and_respawned(store: Engine, lmstfy: LmstfyPool) -> None:
    older = [lmstfy.publish(NS, "q", b"dead %d" % i, ttl=60) for i in range(3)]
    for job_id in older:
        lmstfy.client.rpop(ready_key(NS, "q"))
        lmstfy.bury(NS, "q", job_id)
    newer = (await store.publish(NS, "q", NewJob(b"ours"))).job_id
    [reserved] = await store.consume(NS, ["q"], 60_000, 0, 1)
    await store.bury(NS, "q", reserved.job_id, "ours died")

    assert await store.dead_letter_size(NS, "q") == 4
    head = await store.dead_letter(NS, "q")
    assert (head.size, head.head) == (4, older[0])  # lmstfy's are older: the oldest comes first
    page = await store.dead_page(NS, "q", 10, None)
    assert [job.job_id for job in page.jobs] == [*older, newer]
    assert lmstfy.client.exists(dead_key(NS, "q")) == 0  # moved, with their data

    assert await store.respawn(NS, "q", 2, 120_000) == 2
    jobs = await consume_all(store, ["q"])
    assert [(job.job_id, job.body) for job in jobs] == [(older[0], b"dead 0"), (older[1], b"dead 1")]
    assert all(110 <= job.ttl <= 120 for job in jobs)


def delivered_by_lmstfy(lmstfy: LmstfyPool) -> str:
    """The id of a job lmstfy published and delivered itself, before the switch."""
    now = int(time.time())
    lmstfy.publish(NS, "q", b"in flight", now=now)
    taken = lmstfy.reserve(NS, ["q"], ttr=1, now=now)
    assert taken is not None
    return taken.job_id


async def test_an_ack_through_lmstfy_py_of_a_job_lmstfy_delivered_is_final(
    store: Engine, lmstfy: LmstfyPool, mover: LmstfyMover
) -> None:
    taken = delivered_by_lmstfy(lmstfy)
    assert await store.ack(NS, "q", taken) is True
    assert lmstfy.client.exists(job_key(NS, "q", taken)) == 0
    assert await store.consume(NS, ["q"], 60_000, 2_500, 1) == []  # its reservation ended: nothing comes back
    assert lmstfy.client.zcard(TIMER_SET) == 0


async def test_complete_through_lmstfy_py_of_a_job_lmstfy_delivered_is_an_ack(
    store: Engine, lmstfy: LmstfyPool, mover: LmstfyMover
) -> None:
    taken = delivered_by_lmstfy(lmstfy)
    await store.set_queue_settings(NS, "q", SettingsChange(60, None))
    await store.complete(NS, "q", taken, b"result")
    assert lmstfy.client.exists(job_key(NS, "q", taken)) == 0
    with pytest.raises(NotFound):  # it had no keep: no record
        await store.peek_job(NS, "q", taken)
    with pytest.raises(NotFound):
        await store.complete(NS, "q", taken, b"result")
    assert await store.consume(NS, ["q"], 60_000, 2_500, 1) == []


async def test_complete_of_a_job_lmstfy_published_is_an_ack(store: Engine, lmstfy: LmstfyPool) -> None:
    lmstfy.publish(NS, "q", b"moved")
    [job] = await store.consume(NS, ["q"], 60_000, 0, 1)
    await store.complete(NS, "q", job.job_id, b"result")
    with pytest.raises(NotFound):  # published under lmstfy with no keep: an ACK
        await store.peek_job(NS, "q", job.job_id)


@pytest.mark.usefixtures("mover")
async def test_a_consume_that_acks_a_job_lmstfy_delivered_makes_it_final(store: Engine, lmstfy: LmstfyPool) -> None:
    lmstfy.publish(NS, "q", b"in flight")
    taken = lmstfy.reserve(NS, ["q"], ttr=1)
    assert taken is not None
    # A layout's ACK has a step of its own: the consume runs it before reserving.
    assert await store.consume(NS, ["q"], 60_000, 2_500, 1, acks={"q": [taken.job_id]}) == []
    assert (lmstfy.client.exists(job_key(NS, "q", taken.job_id)), lmstfy.client.zcard(TIMER_SET)) == (0, 0)


async def test_a_reservation_is_ended_only_through_the_server_that_made_it(
    store: Engine, lmstfy: LmstfyPool, mover: LmstfyMover, pump: Pump
) -> None:
    """docs/MIGRATING.md, a rolling switch: lmstfy's reservation cannot be released, touched or
    buried through lmstfy-py; an ACK through lmstfy of a job lmstfy-py delivered deletes nothing,
    so the job comes back when its ttr ends."""
    now = int(time.time())
    lmstfy.publish(NS, "q", b"taken by lmstfy", now=now)
    theirs = lmstfy.reserve(NS, ["q"], ttr=60, now=now)
    assert theirs is not None
    with pytest.raises(NotFound):
        await store.release(NS, "q", theirs.job_id, 0, "")
    with pytest.raises(NotFound):
        await store.touch(NS, "q", theirs.job_id, 60_000)
    with pytest.raises(NotFound):
        await store.bury(NS, "q", theirs.job_id, "")

    lmstfy.publish(NS, "q", b"taken by lmstfy-py", ttl=600, tries=2, now=now)
    [ours] = await store.consume(NS, ["q"], 1_000, 0, 1)
    lmstfy.ack(NS, "q", ours.job_id)  # lmstfy's ACK: DEL of its own data key, long gone
    [again] = await store.consume(NS, ["q"], 60_000, 3_000, 1)
    assert (again.job_id, again.body, again.remain_tries) == (ours.job_id, b"taken by lmstfy-py", 0)


async def test_the_next_jobs_list_lmstfys_ready_jobs_first_in_the_order_consumes_take_them(
    store: Engine, lmstfy: LmstfyPool
) -> None:
    ours = (await store.publish(NS, "q", NewJob(b"ours"))).job_id
    first, second = lmstfy.publish(NS, "q", b"first"), lmstfy.publish(NS, "q", b"second")
    listed = await store.next_jobs(NS, "q", 10)
    assert [(info.job.job_id, info.state) for info in listed] == [(first, "ready"), (second, "ready"), (ours, "ready")]
    assert [info.job.job_id for info in await store.next_jobs(NS, "q", 2)] == [first, second]
    assert [job.job_id for job in await consume_all(store, ["q"])] == [first, second, ours]


async def test_peek_size_stats_registry_and_a_job_by_id_see_lmstfys_jobs(store: Engine, lmstfy: LmstfyPool) -> None:
    job_id = lmstfy.publish(NS, "q", b"peeked", ttl=300, tries=4)
    lmstfy.publish("other-ns", "r", b"x")
    peeked = await store.peek_queue(NS, "q")
    assert (peeked.job_id, peeked.body, peeked.remain_tries) == (job_id, b"peeked", 4)
    assert await store.size(NS, "q") == 1 and (await store.stats(NS, "q")).ready == 1
    info = await store.peek_job(NS, "q", job_id)
    assert (info.state, info.job.body, 298 <= info.job.ttl <= 300) == ("unknown", b"peeked", True)
    assert {NS, "other-ns"} <= set(await store.namespaces()) and await store.queues(NS) == ["q"]
    assert await store.queue_exists(NS, "q")
    with pytest.raises(NotFound):
        await store.peek_job(NS, "q", "01J0000000000000000000NONE")
    assert await consume_all(store, ["q"])  # peeking moved nothing


async def test_destroy_and_purge_delete_lmstfys_jobs_too(store: Engine, lmstfy: LmstfyPool) -> None:
    now = int(time.time())
    for i in range(3):
        lmstfy.publish(NS, "q", b"%d" % i)
    lmstfy.publish(NS, "later", b"d", delay=3600, now=now)
    dead = lmstfy.publish(NS, "gone", b"z")
    lmstfy.client.rpop(ready_key(NS, "gone"))
    lmstfy.bury(NS, "gone", dead)
    kept = lmstfy.publish("kept-ns", "q", b"k", delay=3600, now=now)
    assert await store.destroy(NS, "q") == 3
    assert lmstfy.ready(NS, "q") == []
    assert await store.purge_namespace(NS) == 2  # the delayed one and the dead one
    assert [key for key in lmstfy_keys(lmstfy.client) if NS.encode() in key] == []
    assert NS not in await store.namespaces()
    assert [member.job_id for member, _ in lmstfy.timer()] == [kept]  # another namespace's stays


async def test_the_log_says_when_lmstfys_data_is_found_and_when_none_remains(
    store: Engine, layout: LmstfyLayout, lmstfy: LmstfyPool, caplog: pytest.LogCaptureFixture
) -> None:
    lmstfy.publish(NS, "q", b"x")
    mover = LmstfyMover(layout, nothing_to_adopt)
    with caplog.at_level(logging.INFO, logger="lmstfy_py.store.lmstfy_format"):
        await mover.check()
        assert "pool default holds jobs lmstfy left (1 ready, 0 on its timer, 0 dead)" in caplog.text
        assert layout.present
        await consume_all(store, ["q"])
        await mover.check()
    assert "pool default: nothing of lmstfy's layout remains" in caplog.text
    assert not layout.present  # consumes no longer look at lmstfy's keys
    lmstfy.publish(NS, "q", b"again")  # until a later check finds lmstfy's jobs again
    await mover.check()
    assert layout.present


async def test_a_pool_is_served_so_when_lmstfys_keys_are_found(redis_url: str, lmstfy: LmstfyPool) -> None:
    configs = {"default": PoolConfig("default", url=redis_url)}  # format "auto"
    empty = Pools.connect(configs)
    try:
        assert await empty.serve_lmstfy_layouts(configs) == []
        assert isinstance(empty.get("default"), Engine)
    finally:
        await empty.close()
    lmstfy.publish(NS, "q", b"x")
    found = Pools.connect(configs)
    try:
        assert [store.pool for store in await found.serve_lmstfy_layouts(configs)] == ["default"]
        assert isinstance(getattr(found.get("default"), "layout", None), LmstfyLayout)
        never = {"default": PoolConfig("default", url=redis_url, format="lmstfy-py")}
        assert await Pools.connect(never).serve_lmstfy_layouts(never) == []
    finally:
        await found.close()


def test_the_spellings_of_lmstfys_keys_agree_with_the_fixtures() -> None:
    assert keys.lmstfy_job(NS, "q", "ID") == job_key(NS, "q", "ID")
    assert keys.lmstfy_ready(NS, "q") == ready_key(NS, "q")
    assert keys.lmstfy_dead(NS, "q") == dead_key(NS, "q")
    assert keys.LMSTFY_TIMER == TIMER_SET


async def test_a_job_records_events_from_the_consume_that_moves_it_into_our_layout(
    store: Engine, lmstfy: LmstfyPool
) -> None:
    await store.set_queue_settings(NS, "q", SettingsChange(None, 100))
    old = lmstfy.publish(NS, "q", b"from lmstfy")  # lmstfy's own step: no event
    [job] = await consume_all(store, ["q"])
    assert await store.ack(NS, "q", job.job_id)
    found = [(event["kind"], event["job_id"]) for event in await events_kept(store, NS, "q")]
    assert found == [("reserved", old), ("completed", old)]
