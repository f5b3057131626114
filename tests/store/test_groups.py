"""Groups (SPEC 14) in the engine, against real Redis (standalone and clusters): order within a group,
group_concurrency, the fair ring, releases and ttr, and that an ended group leaves nothing."""

from __future__ import annotations

import asyncio

import pytest

from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.store import keys
from lmstfy_py.store.engine import Engine
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import Job, NewJob, SettingsChange

NS, Q = "ns1", "q1"


async def put(engine: Engine, body: str, group: str | None, queue: str = Q, **more: int) -> str:
    return (await engine.publish(NS, queue, NewJob(body.encode(), group=group, **more))).job_id  # type: ignore[arg-type]


async def take(engine: Engine, count: int = 1, queues: tuple[str, ...] = (Q,), ttr_ms: int = 60_000) -> list[Job]:
    return await engine.consume(NS, list(queues), ttr_ms=ttr_ms, timeout_ms=0, count=count)


def bodies(jobs: list[Job]) -> list[str]:
    return [j.body.decode() for j in jobs]


async def namespace_keys(engine: Engine) -> set[str]:
    found: set[str] = set()
    async for key in engine.redis.scan_iter(match=f"*{{{NS}}}*", count=1000):
        found.add(bytes(key).decode())
    return found


async def test_a_group_delivers_in_order_one_at_a_time_and_the_ring_is_fair(engine: Engine) -> None:
    for i in range(3):
        await put(engine, f"a{i}", "A")
    await put(engine, "a-urgent", "A", priority=5)
    await put(engine, "b0", "B")
    await put(engine, "plain0", None)
    await put(engine, "plain1", None)
    first = await take(engine, 10)
    # One per turn round the ring: A (priority first), B, then the ungrouped jobs' one shared turn.
    assert bodies(first) == ["a-urgent", "b0", "plain0", "plain1"]
    assert await engine.groups_in_flight(NS, Q) == 2
    assert (await engine.peek_job(NS, Q, first[0].job_id)).group == "A"
    assert (await engine.peek_job(NS, Q, first[2].job_id)).group is None
    assert await take(engine) == []  # A's slot is in use: group_concurrency 1
    await engine.ack(NS, Q, first[0].job_id)
    [nxt] = await take(engine)
    assert nxt.body == b"a0"
    await engine.set_queue_settings(NS, Q, SettingsChange(group_concurrency=3))
    assert bodies(await take(engine, 5)) == ["a1", "a2"]  # raised: its free slots, in order


async def test_fairness_a_later_group_is_among_the_next_two_deliveries(engine: Engine) -> None:
    # 2,000 (not more): enough to show B's turn does not wait for A's backlog, and a publish a loaded
    # machine's Redis answers within the client's 2 s (10,000 once did not).
    await engine.publish_many(NS, Q, [NewJob(b"a", group="A") for _ in range(2_000)])
    await engine.set_queue_settings(NS, Q, SettingsChange(group_concurrency=65535))
    assert bodies(await take(engine, 3)) == ["a", "a", "a"]
    await put(engine, "b", "B")
    assert "b" in bodies(await take(engine, 2))
    assert (await engine.stats(NS, Q)).ready == 2_001 - 5


async def test_release_puts_a_job_at_its_groups_front_and_a_delay_holds_the_group(engine: Engine, pump: Pump) -> None:
    for i in range(3):
        await put(engine, f"a{i}", "A", tries=5)
    [a0] = await take(engine)
    await engine.release(NS, Q, a0.job_id, 0, "again")
    [again] = await take(engine)
    assert again.job_id == a0.job_id  # front of its group
    await engine.release(NS, Q, a0.job_id, 300, "later")
    assert await take(engine) == []  # its group waits out the delay with it
    assert await engine.groups_in_flight(NS, Q) == 1
    await asyncio.sleep(0.6)
    [third] = await take(engine)
    assert third.job_id == a0.job_id  # due: the front, and its slot free
    await engine.bury(NS, Q, a0.job_id, "no")  # bury frees the slot
    assert bodies(await take(engine)) == ["a1"]


async def test_ttr_frees_the_slot_to_the_front_and_a_dead_job_frees_it(engine: Engine, pump: Pump) -> None:
    await put(engine, "a0", "A", tries=1)
    await put(engine, "a1", "A", tries=2)
    [a0] = await take(engine, ttr_ms=200)
    assert a0.body == b"a0"
    await asyncio.sleep(0.5)  # ttr passed with no try left: dead, its slot free
    [a1] = await take(engine, ttr_ms=200)
    assert a1.body == b"a1"
    await asyncio.sleep(0.5)  # ttr passed, a try left: ready again at its group's front
    [again] = await take(engine)
    assert again.job_id == a1.job_id


async def test_multi_queue_order_wins_and_an_ended_group_leaves_nothing(engine: Engine) -> None:
    await put(engine, "warm", None, queue="other")
    await engine.ack(NS, "other", (await take(engine, queues=("other",)))[0].job_id)
    before = await namespace_keys(engine)
    await put(engine, "g0", "G")
    await put(engine, "g1", "G")
    await put(engine, "o", "H", queue="other")
    got = await take(engine, 5, queues=("other", Q))
    assert bodies(got) == ["o", "g0"]
    for job in got:
        await engine.ack(NS, job.queue, job.job_id)
    [g1] = await take(engine)
    await engine.ack(NS, Q, g1.job_id)
    after = await namespace_keys(engine)
    assert after - before <= {keys.meta(NS, Q), keys.queues(NS)}  # the queue's counters, as a plain queue's


async def test_a_reserved_grouped_job_whose_ttl_passes_frees_its_slot(engine: Engine, pump: Pump) -> None:
    await put(engine, "short", "A", ttl_ms=300)
    await put(engine, "next", "A")
    [short] = await take(engine)
    assert short.ttl == 1
    await asyncio.sleep(0.7)
    assert bodies(await take(engine)) == ["next"]
    with pytest.raises(NotFound):
        await engine.peek_job(NS, Q, short.job_id)


async def test_promote_makes_a_delayed_job_ready_now_keeping_priority_and_group(engine: Engine) -> None:
    await engine.set_queue_settings(NS, Q, SettingsChange(events=10))
    waiting = await put(engine, "later", "A", delay_ms=3_600_000, priority=7, ttl_ms=0)
    ready = await put(engine, "now", None)
    with pytest.raises(Conflict):
        await engine.promote(NS, Q, ready)
    with pytest.raises(NotFound):
        await engine.promote(NS, Q, "no-such-job")
    assert (await engine.stats(NS, Q)).delayed == 1
    await engine.promote(NS, Q, waiting)
    info = await engine.peek_job(NS, Q, waiting)
    assert (info.state, info.priority, info.group) == ("ready", 7, "A")
    stats = await engine.stats(NS, Q)
    assert (stats.ready, stats.delayed, stats.due.later + stats.due.within_1h) == (2, 0, 0)
    assert await engine.timer_size(NS) == 0
    events = await engine.open_events(NS, [Q], "0")
    kinds = []
    async for event in events:
        kinds.append(getattr(event, "kind", ""))
        if event is None or len(kinds) == 3:
            break
    assert kinds == ["published", "published", "promoted"]
    await events.aclose()  # type: ignore[attr-defined]


async def test_destroy_and_purge_drop_the_groups(engine: Engine) -> None:
    for i in range(3):
        await put(engine, f"a{i}", "A", tries=3)
        await put(engine, f"b{i}", "B", tries=3)
    [_, b0] = await take(engine, 2)
    await engine.release(NS, Q, b0.job_id, 60_000, "later")  # B holds its slot on the timer
    assert await engine.destroy(NS, Q) == 4  # the ready ones, grouped
    assert (await engine.stats(NS, Q)).ready == 0
    assert await engine.groups_in_flight(NS, Q) == 2
    await put(engine, "c", "C")
    await engine.purge_namespace(NS)
    assert await namespace_keys(engine) == set()


async def test_peek_shows_the_job_the_next_consume_gets_round_the_ring(engine: Engine) -> None:
    await put(engine, "a0", "A")
    await put(engine, "a1", "A")
    await put(engine, "plain", None)
    await put(engine, "b0", "B")
    seen = []
    for _ in range(4):
        peeked = await engine.peek_queue(NS, Q)
        [taken] = await take(engine)
        seen.append((peeked.body.decode(), taken.body.decode()))
        if taken.body == b"a0":
            await engine.ack(NS, Q, taken.job_id)  # A's one slot free again for a1
    assert [peeked for peeked, _ in seen] == [taken for _, taken in seen], seen
    assert sorted(taken for _, taken in seen) == ["a0", "a1", "b0", "plain"]


async def test_resuming_a_queue_of_grouped_jobs_wakes_its_long_poll_at_once(engine: Engine) -> None:
    # Its ready jobs are all in groups (the ring, not the ready list): a resume must still wake a
    # waiting consume, not leave it to its next look WAIT_SLICE_S later.
    await engine.pause(NS, Q, True)
    await put(engine, "a", "g")
    waiting = asyncio.create_task(engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=20_000, count=1))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # paused: held
    resumed = asyncio.get_running_loop().time()
    await engine.pause(NS, Q, False)
    assert bodies(await asyncio.wait_for(waiting, 10)) == ["a"]
    assert asyncio.get_running_loop().time() - resumed < 2.0  # woken, not found at the 5 s look


async def test_lowering_group_concurrency_stops_new_deliveries_of_a_group_over_it(engine: Engine) -> None:
    # The group kept the turn it had before the change: that turn must not give it one more job.
    await engine.set_queue_settings(NS, Q, SettingsChange(group_concurrency=3))
    for n in range(5):
        await put(engine, f"g{n}", "G")
    first = await take(engine, 2)
    assert bodies(first) == ["g0", "g1"]
    await engine.set_queue_settings(NS, Q, SettingsChange(group_concurrency=1))
    assert await take(engine) == []  # two reserved, one allowed: nothing more
    await engine.ack(NS, Q, first[0].job_id)
    assert await take(engine) == []  # one reserved, one allowed
    await engine.ack(NS, Q, first[1].job_id)
    assert bodies(await take(engine, 2)) == ["g2"]
