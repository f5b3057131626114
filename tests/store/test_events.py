"""Job events (SPEC 13 Events and Stream) in the engine, against real Redis (standalone and clusters):
each kind recorded by its real operation in the same step, exactly the last N kept, the stream's
replay, cursors, gaps and merged queues, its live tail shared per namespace, and its ends."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from lmstfy_py.config import PoolConfig
from lmstfy_py.errors import Conflict, InvalidParameter
from lmstfy_py.schedules import Schedule
from lmstfy_py.store import event_tail, keys, pools, schedule_ops
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.pump import Pump
from lmstfy_py.store.scheduler import Scheduler
from lmstfy_py.types import Event, Gap, NewJob, SettingsChange
from tests.store.conftest import events_kept

NS, Q = "ns1", "q1"
Item = Event | Gap | None


async def events_on(engine: Engine, most: int = 1000, *queues: str) -> None:
    for queue in queues or (Q,):
        await engine.set_queue_settings(NS, queue, SettingsChange(None, most))


async def drain(stream: AsyncIterator[Item], until_idle: bool = True) -> list[Event | Gap]:
    """What the stream gives until it idles (None) or ends."""
    got: list[Event | Gap] = []
    async for item in stream:
        if item is None and until_idle:
            break
        if item is not None:
            got.append(item)
    return got


async def kept(engine: Engine, queue: str = Q) -> list[dict[str, Any]]:
    """The events the queue's log keeps, oldest first."""
    return await events_kept(engine, NS, queue)


def kinds(found: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in found]


async def test_publish_reserve_touch_release_complete_record_their_fields(engine: Engine, pump: Pump) -> None:
    await events_on(engine)
    before = now_ms()
    job_id = (await engine.publish(NS, Q, NewJob(b"a", priority=3, tries=3))).job_id
    await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1)
    await engine.touch(NS, Q, job_id, 60_000)
    await engine.release(NS, Q, job_id, 300, "busy")
    await asyncio.sleep(1.5)  # the release delay, then the pump makes it ready
    await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=1)
    await engine.complete(NS, Q, job_id, b"r")
    found = await kept(engine)
    assert kinds(found) == ["published", "reserved", "touched", "released", "ready", "reserved", "completed"]
    assert [e["attempt"] for e in found] == [0, 1, 1, 1, 1, 2, 2]
    assert all(e["job_id"] == job_id and e["queue"] == Q and before <= e["ts_ms"] <= now_ms() for e in found)
    assert found[0]["priority"] == 3 and "reason" not in found[0]
    assert found[3]["reason"] == "busy" and "priority" not in found[3]
    assert set(found[1]) == {"kind", "job_id", "queue", "ts_ms", "attempt"}


async def test_a_job_ready_at_once_has_no_ready_event_and_ack_many_complete_each(engine: Engine) -> None:
    await events_on(engine)
    ids = [(await engine.publish(NS, Q, NewJob(b"x"))).job_id for _ in range(3)]
    await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=3)
    assert await engine.ack_many(NS, Q, ids) == 3
    found = await kept(engine)
    assert kinds(found) == ["published"] * 3 + ["reserved"] * 3 + ["completed"] * 3
    assert sorted(e["job_id"] for e in found[-3:]) == sorted(ids)


async def test_ttr_passed_releases_then_kills_and_bury_and_release_without_tries(engine: Engine, pump: Pump) -> None:
    await events_on(engine)
    await engine.publish(NS, Q, NewJob(b"x", tries=2))
    for _ in range(2):
        await engine.consume(NS, [Q], ttr_ms=200, timeout_ms=3000, count=1)
        await asyncio.sleep(1.3)  # its ttr, and the pump's turn
    found = await kept(engine)
    assert kinds(found) == ["published", "reserved", "released", "reserved", "dead"]
    assert (found[2]["reason"], found[2]["attempt"]) == ("ttr passed", 1)
    assert (found[4]["reason"], found[4]["attempt"]) == ("ttr passed with no tries left", 2)
    buried = (await engine.publish(NS, "q2", NewJob(b"b"))).job_id
    last = (await engine.publish(NS, "q2", NewJob(b"l", tries=1))).job_id
    await events_on(engine, 100, "q2")
    await engine.consume(NS, ["q2"], ttr_ms=60_000, timeout_ms=0, count=2)
    await engine.bury(NS, "q2", buried, "broken")
    assert (await engine.release(NS, "q2", last, None, "tired")).buried
    found = await kept(engine, "q2")
    assert [(e["kind"], e["job_id"], e.get("reason")) for e in found] == [
        ("reserved", buried, None),
        ("reserved", last, None),
        ("buried", buried, "broken"),
        ("buried", last, "tired"),
    ]


async def test_dead_letter_verbs_destroy_and_expiry_record_their_ends(engine: Engine, pump: Pump) -> None:
    ids = [(await engine.publish(NS, Q, NewJob(b"x"))).job_id for _ in range(3)]
    await engine.consume(NS, [Q], ttr_ms=60_000, timeout_ms=0, count=3)
    for job_id in ids:
        await engine.bury(NS, Q, job_id, "")
    await events_on(engine)
    assert await engine.respawn(NS, Q, 1, 0) == 1
    await engine.respawn_one(NS, Q, ids[1], 0, 1, 0)
    await engine.delete_dead_one(NS, Q, ids[2])
    assert await engine.destroy(NS, Q) == 2
    expiring = (await engine.publish(NS, Q, NewJob(b"e", ttl_ms=500, keep_s=30))).job_id
    await asyncio.sleep(1.8)
    found = await kept(engine)
    assert [(e["kind"], e["job_id"]) for e in found] == [
        ("respawned", ids[0]),
        ("respawned", ids[1]),
        ("deleted", ids[2]),
        ("deleted", ids[1]),  # destroy: the newest ready first
        ("deleted", ids[0]),
        ("published", expiring),
        ("expired", expiring),
    ]


async def test_exactly_the_last_n_kept_lowering_trims_and_zero_drops(engine: Engine) -> None:
    await events_on(engine, 5)
    ids = [(await engine.publish(NS, Q, NewJob(b"x"))).job_id for _ in range(8)]
    assert [e["job_id"] for e in await kept(engine)] == ids[-5:]
    await engine.set_queue_settings(NS, Q, SettingsChange(None, 2))
    assert [e["job_id"] for e in await kept(engine)] == ids[-2:]
    await engine.set_queue_settings(NS, Q, SettingsChange(None, 0))
    assert await engine.redis.exists(keys.events(NS, Q)) == 0
    await engine.publish(NS, Q, NewJob(b"x"))
    assert await engine.redis.exists(keys.events(NS, Q)) == 0
    with pytest.raises(Conflict, match="events are off for this queue"):
        await engine.open_events(NS, [Q], None)


async def test_replay_from_a_cursor_none_lost_or_repeated_across_the_live_boundary(engine: Engine) -> None:
    await events_on(engine)
    for _ in range(3):
        await engine.publish(NS, Q, NewJob(b"x"))
    first = await drain(await engine.open_events(NS, [Q], "0", idle_s=0.2))
    assert [e.cursor for e in first if isinstance(e, Event)] == ["1", "2", "3"]
    stream = await engine.open_events(NS, [Q], "1", idle_s=0.3)
    for _ in range(2):
        await engine.publish(NS, Q, NewJob(b"x"))
    got = await drain(stream)
    assert [e.cursor for e in got if isinstance(e, Event)] == ["2", "3", "4", "5"]
    live = await engine.open_events(NS, [Q], None, idle_s=0.3)
    await engine.publish(NS, Q, NewJob(b"x"))
    assert [e.cursor for e in await drain(live) if isinstance(e, Event)] == ["6"]


async def test_a_gap_counts_exactly_the_trimmed_events(engine: Engine) -> None:
    await events_on(engine, 3)
    for _ in range(10):
        await engine.publish(NS, Q, NewJob(b"x"))
    got = await drain(await engine.open_events(NS, [Q], "4", idle_s=0.2))
    assert got[0] == Gap(Q, 3)  # 5, 6 and 7 trimmed
    assert [e.cursor for e in got[1:] if isinstance(e, Event)] == ["8", "9", "10"]
    assert not any(isinstance(e, Gap) for e in await drain(await engine.open_events(NS, [Q], "7", idle_s=0.2)))


async def test_bad_cursors_and_queues_off_are_refused_before_any_item(engine: Engine) -> None:
    await events_on(engine, 10, Q, "q2")
    await engine.publish(NS, Q, NewJob(b"x"))
    for after in ("x", "-1", "2", "1.0", "", "1-0"):
        with pytest.raises(InvalidParameter, match="invalid after"):
            await engine.open_events(NS, [Q], after)
    with pytest.raises(InvalidParameter, match="invalid after"):
        await engine.open_events(NS, [Q, "q2"], "1")
    with pytest.raises(Conflict, match="events are off for this queue"):
        await engine.open_events(NS, [Q, "off"], None)
    for queues in ([], [Q, Q], [f"m{i}" for i in range(17)]):
        with pytest.raises(InvalidParameter, match="invalid queues"):
            await engine.open_events(NS, queues, None)


async def test_a_merged_stream_keeps_order_per_queue_and_its_cursors_resume(engine: Engine) -> None:
    queues = [f"m{i}" for i in range(16)]
    await events_on(engine, 100, *queues)
    for round_ in range(2):
        for queue in queues:
            await engine.publish(NS, queue, NewJob(str(round_).encode()))
    got = [e for e in await drain(await engine.open_events(NS, queues, "0", idle_s=0.3)) if isinstance(e, Event)]
    assert len(got) == 32
    for queue in queues:
        mine = [json.loads(e.data)["job_id"] for e in got if json.loads(e.data)["queue"] == queue]
        assert len(mine) == 2
    resume_at = got[20].cursor
    rest = await drain(await engine.open_events(NS, queues, resume_at, idle_s=0.3))
    assert [e.data for e in rest if isinstance(e, Event)] == [e.data for e in got[21:]]
    # The same cursor, the queues named in another order: each queue resumes where it was.
    again = await drain(await engine.open_events(NS, queues[::-1], resume_at, idle_s=0.3))
    assert sorted(e.data for e in again if isinstance(e, Event)) == sorted(e.data for e in got[21:])


async def test_live_events_arrive_promptly_through_one_shared_reader(engine: Engine) -> None:
    await events_on(engine)
    streams = [await engine.open_events(NS, [Q], None, idle_s=5) for _ in range(200)]
    firsts = [asyncio.ensure_future(anext(stream)) for stream in streams]
    await asyncio.sleep(0.5)
    assert engine.event_tail.watching() == 200
    commands_before = await xread_calls(engine)
    started = time.monotonic()
    await engine.publish(NS, Q, NewJob(b"x"))
    items = await asyncio.wait_for(asyncio.gather(*firsts), 2)
    assert time.monotonic() - started < 1  # live, not after the streams' idle_s (latency: a benchmark's)
    assert all(isinstance(item, Event) and item.cursor == "1" for item in items)
    await asyncio.sleep(1)
    # One reader: a handful of XREADs a second (each blocks READ_MS), not one per open stream.
    assert await xread_calls(engine) - commands_before < 20
    for stream in streams:
        await stream.aclose()  # type: ignore[attr-defined]
    assert engine.event_tail.watching() == 0


async def on_every_node(engine: Engine, *command: str) -> list[Any]:
    """The command's answer from each Redis of the pool."""
    client: Any = engine.redis
    if isinstance(client, RedisCluster):
        answers = await client.execute_command(*command, target_nodes=RedisCluster.ALL_NODES)
        return list(answers.values()) if isinstance(answers, dict) else [answers]
    return [await client.execute_command(*command)]


async def test_a_slow_reader_left_behind_reads_the_rest_from_the_log(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_tail, "MOST_BEHIND", 5)
    await events_on(engine)
    stream = await engine.open_events(NS, [Q], None, idle_s=0.5)
    for _ in range(30):
        await engine.publish(NS, Q, NewJob(b"x"))
    await asyncio.sleep(0.5)  # the tail read them all, and kept only 5 for this stream
    got = await drain(stream)
    assert [e.cursor for e in got if isinstance(e, Event)] == [str(n) for n in range(1, 31)]


async def xread_calls(engine: Engine) -> int:
    total = 0
    for stats in await on_every_node(engine, "INFO", "commandstats"):
        total += int(stats.get("cmdstat_xread", {}).get("calls", 0))
    return total


async def test_stop_waiting_ends_open_streams_and_new_ones(engine: Engine) -> None:
    await events_on(engine)
    stream = await engine.open_events(NS, [Q], None, idle_s=30)
    reading = asyncio.ensure_future(drain(stream, until_idle=False))
    await asyncio.sleep(0.3)
    await engine.stop_waiting()
    assert await asyncio.wait_for(reading, 1) == []
    assert await drain(await engine.open_events(NS, [Q], "0", idle_s=30), until_idle=False) == []


async def test_idle_streams_yield_none(engine: Engine) -> None:
    await events_on(engine)
    stream = await engine.open_events(NS, [Q], None, idle_s=0.2)
    started = time.monotonic()
    assert await anext(stream) is None
    assert 0.15 <= time.monotonic() - started < 1


async def test_the_tail_reads_again_after_its_connection_fails(engine: Engine) -> None:
    await events_on(engine)
    stream = await engine.open_events(NS, [Q], None, idle_s=10)
    await engine.publish(NS, Q, NewJob(b"x"))
    assert isinstance(await anext(stream), Event)
    client: Any = engine.redis  # every connection but this one: the tail's XREAD in flight fails
    nodes = {"target_nodes": RedisCluster.ALL_NODES} if isinstance(client, RedisCluster) else {}
    await client.client_kill_filter(_type="normal", skipme=True, **nodes)
    await asyncio.sleep(0.5)
    await engine.publish(NS, Q, NewJob(b"y"))
    item = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(item, Event) and item.cursor == "2"


async def test_carried_acks_republish_and_a_recurring_jobs_fire_record_their_events(engine: Engine) -> None:
    await events_on(engine)
    # ack.lua loaded first: one Redis has to load runs again after the pipeline (scripts.run_pipeline).
    assert not await engine.ack(NS, Q, "unknown")
    carried = (await engine.publish(NS, Q, NewJob(b"carried"))).job_id
    await engine.consume(NS, [Q], 60_000, 0, 1)
    nxt = (await engine.publish(NS, Q, NewJob(b"next"))).job_id
    await engine.consume(NS, [Q], 60_000, 0, 1, acks={Q: [carried]})
    again = (await engine.publish(NS, Q, NewJob(b"again"), replaces=nxt)).job_id
    plan = Schedule("s", Q, None, 60, "UTC", b"cron", 3_600_000, 1, 0, "one")
    _, first = await schedule_ops.put(engine, NS, plan, now_ms())
    await Scheduler(engine, lambda: first).tick()
    found = await kept(engine)
    assert [(e["kind"], e["job_id"]) for e in found[:7]] == [
        ("published", carried),
        ("reserved", carried),
        ("published", nxt),
        ("completed", carried),
        ("reserved", nxt),
        ("completed", nxt),  # the republish ends it in its own step
        ("published", again),
    ]
    assert [e["kind"] for e in found[7:]] == ["published"]


async def test_events_on_a_sentinel_pool(sentinel_config: PoolConfig) -> None:
    engine = pools.engine("default", sentinel_config)
    try:
        await events_on(engine)
        stream = await engine.open_events(NS, [Q], None, idle_s=5)
        job_id = (await engine.publish(NS, Q, NewJob(b"x"))).job_id
        item = await asyncio.wait_for(anext(stream), 2)
        assert isinstance(item, Event) and json.loads(item.data)["job_id"] == job_id
    finally:
        await engine.close()
