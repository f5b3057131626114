"""A pool migrating to another (`migrate_to`): lmstfy's rules, on real Redis.

The engine-level tests use two databases of the standalone test Redis as the two pools and run
every public operation of the engine through the migrating pool, on a job of the old pool
(`legacy`, published before the migration) and one of the new (`fresh`): publishes go to the
new pool, consumes drain the old first, everything that names a job or a queue finds it in
either. The end-to-end test migrates a standalone pool to the 3-master cluster through the HTTP API.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.runtime import Runtime
from lmstfy_py.schedules import Schedule
from lmstfy_py.store import keys, migration, pools
from lmstfy_py.store.engine import Engine, EngineObserver, now_ms
from lmstfy_py.store.migration import MigrationEngine
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import (
    DeadLetterHead,
    DueBuckets,
    Job,
    NewJob,
    QueueSettings,
    QueueStats,
    SettingsChange,
)
from lmstfy_py.web import create_data_app
from tests.conftest import client_for
from tests.store.conftest import events_kept

NS, Q = "ns", "q"


@pytest.fixture
async def old(redis_url: str) -> AsyncIterator[Engine]:
    engine = pools.engine("default", PoolConfig("default", url=f"{redis_url}/0"))
    yield engine
    await engine.close()


@pytest.fixture
async def new(redis_url: str) -> AsyncIterator[Engine]:
    engine = pools.engine("new", PoolConfig("new", url=f"{redis_url}/1"))
    yield engine
    await engine.close()


@pytest.fixture
def migrating(old: Engine, new: Engine) -> MigrationEngine:
    return MigrationEngine(old, new)


async def consume_one(engine: Engine, timeout_ms: int = 0, queues: tuple[str, ...] = (Q,)) -> str | None:
    jobs = await engine.consume(NS, list(queues), ttr_ms=60_000, timeout_ms=timeout_ms, count=1)
    return jobs[0].job_id if jobs else None


async def holds(engine: Engine, job_id: str, queue: str = Q) -> bool:
    """Whether `engine`'s pool stores the job (in any state)."""
    try:
        await engine.peek_job(NS, queue, job_id)
    except NotFound:
        return False
    return True


@pytest.fixture
async def legacy(old: Engine) -> str:
    """A ready job published before the migration: in the old pool."""
    return (await old.publish(NS, Q, NewJob(b"old"))).job_id


@pytest.fixture
async def fresh(migrating: MigrationEngine, legacy: str) -> str:
    """A ready job published through the migrating pool, after `legacy`."""
    return (await migrating.publish(NS, Q, NewJob(b"new"))).job_id


# -- publish ---------------------------------------------------------------------------------------


async def test_publish_and_bulk_publish_go_to_the_new_pool(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    bulk = [p.job_id for p in await migrating.publish_many(NS, Q, [NewJob(b"1"), NewJob(b"2")])]
    for job_id in (fresh, *bulk):
        assert await holds(new, job_id) and not await holds(old, job_id)
    assert (await old.size(NS, Q), await new.size(NS, Q)) == (1, 3)


@pytest.mark.parametrize("pool", ["old", "new"])
async def test_republish_acks_the_replaced_job_in_its_pool(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str, pool: str
) -> None:
    replaced, kept = (legacy, fresh) if pool == "old" else (fresh, legacy)
    assert [await consume_one(migrating), await consume_one(migrating)] == [legacy, fresh]  # both reserved
    replacement = (await migrating.publish(NS, Q, NewJob(b"again"), replaces=replaced)).job_id
    assert not await holds(old, replaced) and not await holds(new, replaced)
    assert await holds(new, replacement)
    # The replaced job's reservation went with it: only the other one's is left, and it is never delivered again.
    assert await old.timer_size(NS) + await new.timer_size(NS) == 1
    assert await consume_one(migrating) == replacement
    assert await migrating.ack(NS, Q, kept)


# -- consume ---------------------------------------------------------------------------------------


async def test_consume_drains_the_old_pool_first(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    assert await consume_one(migrating) == legacy
    assert (await old.timer_size(NS), await new.timer_size(NS)) == (1, 0)  # reserved in its own pool
    assert await consume_one(migrating) == fresh
    assert (await old.timer_size(NS), await new.timer_size(NS)) == (1, 1)
    assert await consume_one(migrating) is None


async def test_bulk_publish_and_multi_queue_consume(migrating: MigrationEngine, old: Engine) -> None:
    legacy = (await old.publish(NS, "b", NewJob(b"old"))).job_id
    fresh = [p.job_id for p in await migrating.publish_many(NS, "a", [NewJob(b"1"), NewJob(b"2")])]
    assert await consume_one(migrating, queues=("a", "b")) == legacy  # the old pool first, whatever the queue
    assert [await consume_one(migrating, queues=("a", "b")) for _ in fresh] == fresh


async def test_stop_waiting_ends_a_long_poll_at_once(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    waiting = asyncio.create_task(consume_one(migrating, timeout_ms=60_000))
    await asyncio.sleep(0.1)
    await migrating.stop_waiting()
    assert await asyncio.wait_for(waiting, 2) is None
    assert old.stopping and new.stopping
    assert await asyncio.wait_for(consume_one(migrating, timeout_ms=60_000), 2) is None  # no new wait either


async def test_a_migrating_pool_says_it_is_stopping(migrating: MigrationEngine) -> None:
    await migrating.stop_waiting()
    assert migrating.stopping


# -- ack, peek, size -------------------------------------------------------------------------------


async def test_ack_finds_a_job_in_either_pool(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    assert await migrating.ack(NS, Q, legacy) and await migrating.ack(NS, Q, fresh)
    assert not await holds(old, legacy) and not await holds(new, fresh)
    assert not await migrating.ack(NS, Q, fresh)


async def test_ack_many_finds_jobs_in_both_pools(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    elsewhere = (await old.publish(NS, "other", NewJob(b"x"))).job_id  # not in queue q: not ACKed by an ACK of q
    assert await migrating.ack_many(NS, Q, [legacy, fresh, elsewhere]) == 2
    assert not await holds(old, legacy) and not await holds(new, fresh)
    assert await holds(old, elsewhere, "other")
    assert await migrating.ack_many(NS, Q, [legacy, fresh]) == 0


async def test_a_consume_acks_first_in_both_pools(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    other = (await old.publish(NS, "other", NewJob(b"x"))).job_id
    assert await migrating.consume(NS, ["empty"], 60_000, 0, 10, acks={Q: [legacy, fresh], "other": [other]}) == []
    assert not await holds(old, legacy) and not await holds(new, fresh) and not await holds(old, other, "other")


async def test_peek_queue_shows_the_old_pools_head_first(migrating: MigrationEngine, legacy: str, fresh: str) -> None:
    assert (await migrating.peek_queue(NS, Q)).job_id == legacy
    await migrating.ack(NS, Q, legacy)
    assert (await migrating.peek_queue(NS, Q)).job_id == fresh
    await migrating.ack(NS, Q, fresh)
    with pytest.raises(NotFound):
        await migrating.peek_queue(NS, Q)


async def test_next_jobs_list_the_old_pools_first_as_consumes_drain_it(
    migrating: MigrationEngine, old: Engine, legacy: str, fresh: str
) -> None:
    older = (await old.publish(NS, Q, NewJob(b"old 2", priority=4))).job_id  # first in its pool
    newer = (await migrating.publish(NS, Q, NewJob(b"new 2"))).job_id
    listed = [info.job.job_id for info in await migrating.next_jobs(NS, Q, 10)]
    assert listed == [older, legacy, fresh, newer]
    assert [info.job.job_id for info in await migrating.next_jobs(NS, Q, 3)] == listed[:3]
    assert [await consume_one(migrating) for _ in listed] == listed


async def test_peek_job_finds_a_job_in_either_pool(migrating: MigrationEngine, legacy: str, fresh: str) -> None:
    assert (await migrating.peek_job(NS, Q, legacy)).job.body == b"old"
    assert (await migrating.peek_job(NS, Q, fresh)).job.body == b"new"
    await migrating.ack(NS, Q, legacy)
    with pytest.raises(NotFound):
        await migrating.peek_job(NS, Q, legacy)


async def test_sizes_add_up_both_pools(migrating: MigrationEngine, old: Engine, legacy: str, fresh: str) -> None:
    assert await migrating.size(NS, Q) == 2
    await old.publish(NS, Q, NewJob(b"later", delay_ms=60_000))
    await migrating.publish_many(NS, Q, [NewJob(b"later", delay_ms=60_000)] * 2)
    assert await migrating.timer_size(NS) == 3
    assert await migrating.size(NS, Q) == 2  # ready jobs only


async def test_destroy_empties_the_queue_in_both_pools(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    assert await migrating.destroy(NS, Q) == 2
    assert (await old.size(NS, Q), await new.size(NS, Q)) == (0, 0)
    assert not await holds(old, legacy) and not await holds(new, fresh)


# -- dead letter -----------------------------------------------------------------------------------


async def kill(engine: Engine, count: int) -> list[str]:
    """`count` jobs of queue q driven into `engine`'s dead letter one by one (ttr 0 expires at once)."""
    job_ids = []
    for _ in range(count):
        job_ids.append((await engine.publish(NS, Q, NewJob(b"doomed"))).job_id)
        await engine.consume(NS, [Q], ttr_ms=0, timeout_ms=0, count=1)
        deadline = time.monotonic() + 3
        while await engine.dead_letter_size(NS, Q) < len(job_ids):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    return job_ids


@pytest.fixture
async def pumps(old: Engine, new: Engine) -> AsyncIterator[None]:
    running = [Pump(old), Pump(new)]
    for pump in running:
        pump.start()
    yield
    for pump in running:
        await pump.stop()


@pytest.mark.usefixtures("pumps")
async def test_dead_letters_of_both_pools(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    new_dead = await kill(new, 2)
    old_dead = await kill(old, 2)
    head = await migrating.dead_letter(NS, Q)
    assert (head.size, head.head) == (4, old_dead[0])
    assert await migrating.dead_letter_size(NS, Q) == 4
    assert await migrating.dead_letter_ids(NS, Q, 3) == [*old_dead, new_dead[0]]
    # A limit spills over from the old pool to the new one; jobs stay in their pool.
    assert await migrating.respawn(NS, Q, 3, ttl_ms=60_000) == 3
    assert (await old.size(NS, Q), await new.size(NS, Q)) == (2, 1)
    assert await migrating.delete_dead(NS, Q, 5) == 1
    assert await migrating.dead_letter_size(NS, Q) == 0
    assert not await holds(new, new_dead[1])  # buried with its data


@pytest.mark.usefixtures("pumps")
async def test_the_new_pools_dead_letter_head_once_the_old_has_none(migrating: MigrationEngine, new: Engine) -> None:
    (dead,) = await kill(new, 1)
    assert await migrating.dead_letter(NS, Q) == DeadLetterHead(1, dead)
    assert await migrating.dead_letter_ids(NS, Q, 10) == [dead]


# -- registry and pump -----------------------------------------------------------------------------


async def test_namespaces_and_queues_are_the_union(migrating: MigrationEngine, old: Engine) -> None:
    await old.publish("a", "q1", NewJob(b"x"))
    await migrating.publish("b", "q2", NewJob(b"x"))
    await migrating.publish("a", "q3", NewJob(b"x"))
    assert await migrating.namespaces() == ["a", "b"]
    assert await migrating.queues("a") == ["q1", "q3"]


async def test_purge_namespace_deletes_its_jobs_in_both_pools(
    migrating: MigrationEngine, old: Engine, new: Engine, legacy: str, fresh: str
) -> None:
    await old.publish(NS, Q, NewJob(b"later", delay_ms=60_000))
    await migrating.publish(NS, Q, NewJob(b"later", delay_ms=60_000))
    await old.publish("kept", Q, NewJob(b"x"))
    assert await migrating.purge_namespace(NS) == 4
    assert (await migrating.size(NS, Q), await migrating.timer_size(NS)) == (0, 0)
    assert not await holds(old, legacy) and not await holds(new, fresh)
    assert await migrating.namespaces() == ["kept"]


async def test_the_worker_verbs_act_where_the_job_lives(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    """release, touch and bury find a reserved job in the old pool and in the new one."""
    await old.publish(NS, Q, NewJob(b"old", tries=3))
    await migrating.publish(NS, Q, NewJob(b"new", tries=3))
    legacy, fresh = await consume_one(migrating), await consume_one(migrating)
    assert legacy is not None and fresh is not None
    for job_id, pool in ((legacy, old), (fresh, new)):
        due = await migrating.touch(NS, Q, job_id, ttr_ms=600_000)
        assert (await pool.peek_job(NS, Q, job_id)).due_ms == due
        released = await migrating.release(NS, Q, job_id, delay_ms=0, reason="later")
        assert not released.buried and released.remain_tries == 2
        assert (await pool.peek_job(NS, Q, job_id)).state == "ready"
    assert await consume_one(migrating) == legacy  # released into the old pool: still drained first
    await migrating.bury(NS, Q, legacy, "no")
    assert (await old.peek_job(NS, Q, legacy)).state == "dead"
    with pytest.raises(NotFound):
        await migrating.release(NS, Q, "no-such-job", delay_ms=None, reason="")
    with pytest.raises(Conflict):  # alive in the new pool, but not reserved
        await migrating.touch(NS, Q, fresh, ttr_ms=1000)


async def test_stats_add_up_and_pause_acts_on_both_pools(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    first = now_ms()
    await old.publish(NS, Q, NewJob(b"old"))
    await migrating.publish(NS, Q, NewJob(b"new"))
    await migrating.publish(NS, Q, NewJob(b"later", delay_ms=60_000))
    # SPEC 14's fields too: the older pool's ready job is the oldest; the delayed one is due within 1 min.
    oldest = (await old.stats(NS, Q)).oldest_ready_ms
    assert oldest is not None and first <= oldest <= now_ms()
    counts = QueueStats(ready=2, delayed=1, reserved=0, dead=0, paused=False)
    assert await migrating.stats(NS, Q) == replace(counts, oldest_ready_ms=oldest, due=DueBuckets(within_1m=1))
    await migrating.pause(NS, Q, True)
    assert (await old.stats(NS, Q)).paused and (await new.stats(NS, Q)).paused
    assert await consume_one(migrating) is None
    await migrating.pause(NS, Q, False)
    assert (await migrating.stats(NS, Q)).paused is False
    assert await consume_one(migrating) is not None


async def test_a_business_id_taken_in_the_old_pool_is_a_duplicate(migrating: MigrationEngine, old: Engine) -> None:
    await old.publish(NS, Q, NewJob(b"old", job_id="order-42"))
    jobs = [NewJob(b"again", job_id="order-42"), NewJob(b"x", job_id="order-43")]
    results = await migrating.publish_many(NS, Q, jobs)
    assert [(r.job_id, r.created) for r in results] == [("order-42", False), ("order-43", True)]
    assert (await migrating.peek_job(NS, Q, "order-42")).job.body == b"old"


async def test_the_dead_letter_by_id_spans_both_pools(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    """Paged as one list (the old pool's first); respawn and delete by id act where the job lives."""
    for pool, names in ((old, ("o1", "o2")), (new, ("n1", "n2"))):
        for name in names:
            await pool.publish(NS, Q, NewJob(name.encode(), job_id=name))
            [job] = await pool.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1)
            await pool.bury(NS, Q, job.job_id, f"broke {name}")
    seen: list[str] = []
    page = await migrating.dead_page(NS, Q, limit=3, after=None)
    seen += [job.job_id for job in page.jobs]
    while page.next is not None:
        page = await migrating.dead_page(NS, Q, limit=3, after=page.next)
        seen += [job.job_id for job in page.jobs]
    assert seen == ["o1", "o2", "n1", "n2"]
    await migrating.respawn_one(NS, Q, "o2", ttl_ms=0, tries=1, delay_ms=0)
    await migrating.delete_dead_one(NS, Q, "n1")
    assert (await old.peek_job(NS, Q, "o2")).state == "ready"
    assert not await holds(new, "n1")
    assert [job.job_id for job in (await migrating.dead_page(NS, Q, 10, None)).jobs] == ["o1", "n2"]


async def test_a_queue_exists_when_either_pool_has_it(migrating: MigrationEngine, old: Engine) -> None:
    assert not await migrating.queue_exists(NS, "only-old")
    await old.publish(NS, "only-old", NewJob(b"x"))
    await migrating.publish(NS, "only-new", NewJob(b"x"))
    assert await migrating.queue_exists(NS, "only-old") and await migrating.queue_exists(NS, "only-new")
    assert not await migrating.queue_exists(NS, "neither")


async def test_ping_answers_only_while_both_pools_answer(migrating: MigrationEngine, tmp_path: Path) -> None:
    await migrating.ping()
    gone = RedisProcess(tmp_path / "gone")  # never started: nothing answers on its port
    unreachable = pools.engine("new", PoolConfig("new", url=gone.url))
    try:
        with pytest.raises(RedisConnectionError):
            await MigrationEngine(migrating.old, unreachable).ping()
        with pytest.raises(RedisConnectionError):
            await MigrationEngine(unreachable, migrating.new).ping()
    finally:
        await unreachable.close()


# Each operation of the JobStore contract (every public operation of MigrationEngine: the web layer
# calls nothing else of a JobStore), and the test above that runs it through a migrating pool on jobs
# of both pools. An operation added to the contract fails the test below until it has one.
async def test_settings_are_the_new_pools_and_set_on_both(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    await old.set_queue_settings(NS, Q, SettingsChange(99, 7))  # what the old pool alone still says is not the queue's
    assert await migrating.queue_settings(NS, Q) == QueueSettings(0, 0)
    assert await migrating.set_queue_settings(NS, Q, SettingsChange(30, None)) == QueueSettings(30, 0)
    assert await old.queue_settings(NS, Q) == QueueSettings(30, 7)
    assert await new.queue_settings(NS, Q) == QueueSettings(30, 0)


async def test_events_are_the_new_pools(migrating: MigrationEngine, old: Engine, new: Engine) -> None:
    with pytest.raises(Conflict, match="events are off for this queue"):
        await migrating.open_events(NS, [Q], "0")
    await migrating.set_queue_settings(NS, Q, SettingsChange(None, 10))
    await old.publish(NS, Q, NewJob(b"old"))
    fresh = (await migrating.publish(NS, Q, NewJob(b"new"))).job_id
    got = await events_kept(migrating, NS, Q)
    assert [(e["kind"], e["job_id"]) for e in got] == [("published", fresh)]


async def test_complete_and_result_act_where_the_job_lives(
    migrating: MigrationEngine, old: Engine, new: Engine
) -> None:
    await old.publish(NS, Q, NewJob(b"old", keep_s=30))
    await migrating.publish(NS, Q, NewJob(b"new", keep_s=30))
    legacy, fresh = await consume_one(migrating), await consume_one(migrating)
    assert legacy is not None and fresh is not None
    waiting = asyncio.create_task(migrating.result(NS, Q, fresh, 10_000))
    for job_id, pool in ((legacy, old), (fresh, new)):
        await migrating.complete(NS, Q, job_id, job_id.encode())
        assert (await pool.peek_job(NS, Q, job_id)).result == job_id.encode()
    ended, info = await asyncio.wait_for(waiting, 5)
    assert (ended, info.state, info.result) == (True, "completed", fresh.encode())
    assert (await migrating.result(NS, Q, legacy, 0))[1].result == legacy.encode()
    with pytest.raises(NotFound):
        await migrating.complete(NS, Q, "no-such-job", b"")
    with pytest.raises(NotFound):
        await migrating.result(NS, Q, "no-such-job", 0)


async def test_promote_acts_where_the_job_lives_and_groups_are_the_new_pools(migrating: MigrationEngine) -> None:
    with pytest.raises(NotFound):
        await migrating.promote(NS, Q, "no-such-job")
    assert await migrating.groups_in_flight(NS, Q) == 0


def plan(name: str, every_s: int = 60) -> Schedule:
    return Schedule(name, Q, None, every_s, "UTC", b"tick", 60_000, 1, 0, "one")


async def test_schedules_are_registered_in_the_new_pool_and_found_in_either(
    migrating: MigrationEngine, old: Engine, new: Engine
) -> None:
    await old.put_schedule(NS, plan("kept"))
    await old.put_schedule(NS, plan("moved"))
    created, _ = await migrating.put_schedule(NS, plan("moved", every_s=30))
    assert created is False  # it replaced the old pool's
    assert (await migrating.put_schedule(NS, plan("fresh")))[0] is True
    assert [s.schedule.name for s in await old.schedules(NS)] == ["kept"]
    assert [s.schedule.name for s in await new.schedules(NS)] == ["fresh", "moved"]
    listed = await migrating.schedules(NS, Q)
    assert [(s.schedule.name, s.schedule.every_s) for s in listed] == [("fresh", 60), ("kept", 60), ("moved", 30)]
    assert (await migrating.schedule(NS, Q, "kept")).schedule.every_s == 60
    assert (await migrating.schedule(NS, Q, "moved")).schedule.every_s == 30
    for name in ("kept", "moved"):
        await migrating.delete_schedule(NS, Q, name)
    with pytest.raises(NotFound):
        await migrating.schedule(NS, Q, "kept")
    with pytest.raises(NotFound):
        await migrating.delete_schedule(NS, Q, "kept")
    assert [s.schedule.name for s in await migrating.schedules(NS)] == ["fresh"]


TESTED_BY = {
    "publish": test_publish_and_bulk_publish_go_to_the_new_pool,
    "publish_many": test_publish_and_bulk_publish_go_to_the_new_pool,
    "consume": test_consume_drains_the_old_pool_first,
    "stop_waiting": test_stop_waiting_ends_a_long_poll_at_once,
    "stopping": test_a_migrating_pool_says_it_is_stopping,
    "ack": test_ack_finds_a_job_in_either_pool,
    "ack_many": test_ack_many_finds_jobs_in_both_pools,
    "release": test_the_worker_verbs_act_where_the_job_lives,
    "touch": test_the_worker_verbs_act_where_the_job_lives,
    "bury": test_the_worker_verbs_act_where_the_job_lives,
    "peek_queue": test_peek_queue_shows_the_old_pools_head_first,
    "next_jobs": test_next_jobs_list_the_old_pools_first_as_consumes_drain_it,
    "peek_job": test_peek_job_finds_a_job_in_either_pool,
    "size": test_sizes_add_up_both_pools,
    "stats": test_stats_add_up_and_pause_acts_on_both_pools,
    "pause": test_stats_add_up_and_pause_acts_on_both_pools,
    "timer_size": test_sizes_add_up_both_pools,
    "destroy": test_destroy_empties_the_queue_in_both_pools,
    "dead_letter": test_dead_letters_of_both_pools,
    "dead_letter_size": test_dead_letters_of_both_pools,
    "dead_letter_ids": test_dead_letters_of_both_pools,
    "dead_page": test_the_dead_letter_by_id_spans_both_pools,
    "respawn": test_dead_letters_of_both_pools,
    "respawn_one": test_the_dead_letter_by_id_spans_both_pools,
    "delete_dead": test_dead_letters_of_both_pools,
    "delete_dead_one": test_the_dead_letter_by_id_spans_both_pools,
    "namespaces": test_namespaces_and_queues_are_the_union,
    "queues": test_namespaces_and_queues_are_the_union,
    "purge_namespace": test_purge_namespace_deletes_its_jobs_in_both_pools,
    "queue_exists": test_a_queue_exists_when_either_pool_has_it,
    "ping": test_ping_answers_only_while_both_pools_answer,
    "queue_settings": test_settings_are_the_new_pools_and_set_on_both,
    "set_queue_settings": test_settings_are_the_new_pools_and_set_on_both,
    "complete": test_complete_and_result_act_where_the_job_lives,
    "open_events": test_events_are_the_new_pools,
    "result": test_complete_and_result_act_where_the_job_lives,
    "promote": test_promote_acts_where_the_job_lives_and_groups_are_the_new_pools,
    "groups_in_flight": test_promote_acts_where_the_job_lives_and_groups_are_the_new_pools,
    "put_schedule": test_schedules_are_registered_in_the_new_pool_and_found_in_either,
    "schedules": test_schedules_are_registered_in_the_new_pool_and_found_in_either,
    "schedule": test_schedules_are_registered_in_the_new_pool_and_found_in_either,
    "delete_schedule": test_schedules_are_registered_in_the_new_pool_and_found_in_either,
}


def test_every_engine_operation_is_tested_through_a_migrating_pool() -> None:
    operations = {
        name
        for name, member in inspect.getmembers(MigrationEngine)
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    }
    assert operations == set(TESTED_BY)


async def test_long_poll_is_woken_by_a_publish(migrating: MigrationEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Slices longer than the test: only a wake-up can end the wait in time.
    monkeypatch.setattr(migration, "MIGRATION_SLICE_S", 60.0)
    waiting = asyncio.create_task(consume_one(migrating, timeout_ms=60_000))
    await asyncio.sleep(0.1)
    job_id = (await migrating.publish(NS, Q, NewJob(b"now"))).job_id
    assert await asyncio.wait_for(waiting, 5) == job_id


async def test_long_poll_sees_a_job_coming_due_in_the_old_pool(migrating: MigrationEngine, old: Engine) -> None:
    pump = Pump(old)
    pump.start()
    try:
        job_id = (await old.publish(NS, Q, NewJob(b"later", delay_ms=300))).job_id
        assert await consume_one(migrating, timeout_ms=5_000) == job_id
    finally:
        await pump.stop()


class Recorder(EngineObserver):
    def __init__(self) -> None:
        self.consumed_ids: list[str] = []

    def consumed(self, pool: str, ns: str, queues: Sequence[str], count: int, jobs: Sequence[Job]) -> None:
        self.consumed_ids += [job.job_id for job in jobs]


async def test_consumes_are_counted_by_the_pool_that_held_the_jobs(
    migrating: MigrationEngine, old: Engine, new: Engine
) -> None:
    old.observer, new.observer = Recorder(), Recorder()
    legacy = (await old.publish(NS, Q, NewJob(b"old"))).job_id
    fresh = (await migrating.publish(NS, Q, NewJob(b"new"))).job_id
    assert [await consume_one(migrating), await consume_one(migrating)] == [legacy, fresh]
    assert (old.observer.consumed_ids, new.observer.consumed_ids) == ([legacy], [fresh])  # type: ignore[attr-defined]


# -- end to end: switching a live pool to migrate_to ---------------------------------------------


async def api_consume_all(data: httpx.AsyncClient, token: str, timeout: int) -> list[str]:
    """Consumes and ACKs until a long-poll of `timeout` seconds finds nothing."""
    consumed: list[str] = []
    while True:
        response = await data.get(f"/api/{NS}/{Q}", params={"timeout": timeout}, headers={"X-Token": token})
        if response.status_code == 404:
            return consumed
        assert response.status_code == 200, response.text
        job_id = response.json()["job_id"]
        consumed.append(job_id)
        ack = await data.delete(f"/api/{NS}/{Q}/job/{job_id}", headers={"X-Token": token})
        assert ack.status_code == 204


async def api_publish(data: httpx.AsyncClient, token: str, **query: int) -> str:
    response = await data.put(f"/api/{NS}/{Q}", content=b"job", params=query, headers={"X-Token": token})
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def test_every_job_of_the_old_pool_is_consumed_through_the_migrating_pool(
    redis_url: str, cluster3_nodes: tuple[str, ...]
) -> None:
    standalone = PoolConfig("default", url=redis_url)
    cluster = PoolConfig("cluster", kind="cluster", cluster_nodes=cluster3_nodes)

    # Before: one pool, holding ready, delayed and reserved (never ACKed) jobs.
    before = await Runtime.start(Config(pools={"default": standalone}))
    try:
        token = await before.tokens.create("default", NS, "migration test")
        async with client_for(create_data_app(before)) as data:
            # The first, consumed and never ACKed, comes back after its ttr with one try left.
            published = [await api_publish(data, token, tries=2)]
            published += [await api_publish(data, token) for _ in range(2)]
            published += [await api_publish(data, token, delay=1) for _ in range(2)]
            reserved = await data.get(f"/api/{NS}/{Q}", params={"ttr": 1}, headers={"X-Token": token})
            assert reserved.json()["job_id"] == published[0]
    finally:
        await before.stop()

    # After: the same pool migrating to the cluster; the token still works.
    config = Config(pools={"default": PoolConfig("default", url=redis_url, migrate_to="cluster"), "cluster": cluster})
    after = await Runtime.start(config)
    try:
        async with client_for(create_data_app(after)) as data:
            fresh = [await api_publish(data, token) for _ in range(3)]
            assert await after.pools.get("cluster").size(NS, Q) == 3  # new jobs land in the new pool
            # The delayed and reserved jobs come due in the old pool while we consume.
            consumed = await api_consume_all(data, token, timeout=2)
        assert sorted(consumed) == sorted(published + fresh)
        old = after.pools.engines()[0]
        assert (await old.size(NS, Q), await old.timer_size(NS), await old.dead_letter_size(NS, Q)) == (0, 0, 0)
        assert not [key async for key in old.redis.scan_iter(match=keys.job(NS, Q, "*"))]
    finally:
        await after.stop()
