"""Recurring jobs in one pool's Redis: register, list, delete, and fire the due ticks.

Each namespace keeps its schedules in three keys of its hash tag (store/keys.py): the packed
schedules, their next ticks (a zset) and their last jobs. A pool-wide index (keys.CRON_INDEX:
namespace -> earliest next tick) tells the scheduler (store/scheduler.py) which namespaces are
due; it is lowered after each registration and re-derived by the scheduler's sweep, as the
pump's due index is (store/due_index.py). Firing a tick is one script (lua/schedule_fire.lua): the claim and the
job's publish are one atomic step, so every tick gives exactly one job, whatever the number of
processes firing, and no job exists only in a process's memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from lmstfy_py.errors import NotFound
from lmstfy_py.schedules import Schedule, ScheduleState, TooManySchedules, unpacked
from lmstfy_py.store import keys
from lmstfy_py.store.contracts.upkeep import (
    ScheduleDeleteArgs,
    ScheduleDeleteKeys,
    ScheduleFireArgs,
    ScheduleFireKeys,
    ScheduleKeys,
    SchedulePutArgs,
)
from lmstfy_py.store.jobdata import encode_data, new_job_id
from lmstfy_py.types import NewJob

if TYPE_CHECKING:
    from lmstfy_py.store.engine_base import EngineBase

FIRE_BATCH = 100  # due schedules one pass over a namespace fires


def _schedule_keys(ns: str) -> list[str]:
    return [keys.schedules(ns), keys.schedule_ticks(ns), keys.schedule_last(ns)]


def _index(ns: str, tick_ms: int) -> tuple[str, ...]:
    return ("ZADD", keys.CRON_INDEX, "LT", str(tick_ms), ns)


async def put(engine: EngineBase, ns: str, schedule: Schedule, now_ms: int, cap: int = 0) -> tuple[bool, int]:
    """Registers (or replaces) the schedule; returns whether it is new, and its first tick.

    A new schedule in a namespace holding `cap` of them (0: no cap) is refused (409), nothing
    stored, the count and the insert being one Lua step; replacing one is always allowed.
    """
    await engine.register_namespace(ns)  # the scheduler's sweep reads the namespace registry
    first = schedule.first(now_ms)
    field = keys.schedule_field(schedule.queue, schedule.name)
    call_keys = ScheduleKeys(keys.schedules(ns), keys.schedule_ticks(ns))
    args = SchedulePutArgs(field, schedule.packed(), first, cap)
    created = await engine.scripts.schedule_put(engine.script_client, call_keys, args)
    if created < 0:
        raise TooManySchedules(cap)
    await engine.script_client.execute_command(*_index(ns, first))
    engine.ticks.scheduled(first)
    return bool(created), first


async def listed(engine: EngineBase, ns: str, queue: str | None = None) -> list[ScheduleState]:
    """The namespace's schedules (of one queue, when given), by queue and name."""
    pipe = engine.redis.pipeline(transaction=False)
    pipe.hgetall(keys.schedules(ns))
    pipe.zrange(keys.schedule_ticks(ns), 0, -1, withscores=True)
    pipe.hgetall(keys.schedule_last(ns))
    specs, ticks, lasts = await pipe.execute()
    next_ms = {member.decode(): int(score) for member, score in ticks}
    found = []
    for raw_field, packed in specs.items():
        field = raw_field.decode()
        in_queue, _, name = field.partition("/")
        if queue is None or in_queue == queue:
            found.append(_state(unpacked(in_queue, name, packed), next_ms.get(field, -1), lasts.get(raw_field)))
    return sorted(found, key=lambda state: (state.schedule.queue, state.schedule.name))


async def one(engine: EngineBase, ns: str, queue: str, name: str) -> ScheduleState:
    field = keys.schedule_field(queue, name)
    pipe = engine.redis.pipeline(transaction=False)
    pipe.hget(keys.schedules(ns), field)
    pipe.zscore(keys.schedule_ticks(ns), field)
    pipe.hget(keys.schedule_last(ns), field)
    packed, tick, last = await pipe.execute()
    if packed is None:
        raise NotFound("schedule not found")
    return _state(unpacked(queue, name, packed), -1 if tick is None else int(tick), last)


def _state(schedule: Schedule, next_ms: int, last: bytes | None) -> ScheduleState:
    if last is None:
        return ScheduleState(schedule, next_ms, None, None)
    at, _, job_id = last.decode().partition(" ")
    return ScheduleState(schedule, next_ms, int(at), job_id)


async def delete(engine: EngineBase, ns: str, queue: str, name: str) -> None:
    field = keys.schedule_field(queue, name)
    call_keys = ScheduleDeleteKeys(keys.schedules(ns), keys.schedule_ticks(ns), keys.schedule_last(ns))
    if not await engine.scripts.schedule_delete(engine.script_client, call_keys, ScheduleDeleteArgs(field)):
        raise NotFound("schedule not found")


async def forget_namespace(engine: EngineBase, ns: str) -> None:
    """Every schedule of the namespace goes (a purge's first step: no tick fires into what it empties)."""
    pipe = engine.redis.pipeline(transaction=False)
    for key in _schedule_keys(ns):
        pipe.delete(key)
    pipe.zrem(keys.CRON_INDEX, ns)
    await pipe.execute()


# -- firing ------------------------------------------------------------------------------------


async def fire_due(engine: EngineBase, ns: str, now_ms: int) -> int:
    """Fires every tick of the namespace due by now_ms; returns its next tick, -1 when it has none.

    A tick late by at most the schedule's grace is fired as usual; an older one was missed and
    follows the schedule's catch-up policy (lmstfy_py/schedules.py).
    """
    ticks_key = keys.schedule_ticks(ns)
    while True:
        # redis-py types replies loosely; without decode_responses these are bytes and float scores.
        due = cast(
            list[tuple[bytes, float]],
            await engine.redis.zrangebyscore(ticks_key, "-inf", now_ms, start=0, num=FIRE_BATCH, withscores=True),
        )
        if not due:
            break
        specs = cast(list[bytes | None], await engine.redis.hmget(keys.schedules(ns), [field for field, _ in due]))
        for (raw_field, tick), packed in zip(due, specs, strict=True):
            if packed is not None:  # else deleted meanwhile
                await _fire(engine, ns, raw_field.decode(), packed, int(tick), now_ms)
        if len(due) < FIRE_BATCH:
            break
    head = await engine.redis.zrange(ticks_key, 0, 0, withscores=True)
    return int(head[0][1]) if head else -1


async def _fire(engine: EngineBase, ns: str, field: str, packed: bytes, tick_ms: int, now_ms: int) -> None:
    queue, _, name = field.partition("/")
    schedule = unpacked(queue, name, packed)
    on_time = now_ms - tick_ms <= schedule.grace_ms(tick_ms)
    next_ms = schedule.following(tick_ms, tick_ms if on_time else now_ms)
    publish = on_time or schedule.catchup == "one"
    job_id = new_job_id(0, 0, now_ms)
    call_keys = ScheduleFireKeys(
        keys.schedules(ns),
        keys.schedule_ticks(ns),
        keys.schedule_last(ns),
        keys.job(ns, queue, job_id),
        keys.timer(ns),
        keys.queues(ns),
        keys.tombstone(ns, queue, job_id),
        keys.ready(ns, queue),
        keys.priority(ns, queue),
        keys.wake(ns, queue),
        keys.meta(ns, queue),
        keys.settings(ns, queue),
    )
    args = ScheduleFireArgs(
        field,
        packed,
        tick_ms,
        next_ms,
        "1" if publish else "0",
        encode_data(schedule.body, None),
        schedule.ttl_ms,
        schedule.tries,
        ns,
        queue,
        job_id,
        now_ms,
        schedule.priority,
    )
    if await engine.scripts.schedule_fire(engine.script_client, call_keys, args) == 1:
        job = NewJob(schedule.body, schedule.ttl_ms, 0, schedule.tries, None, schedule.priority, job_id)
        engine.observer.published(engine.pool, ns, queue, [job], None)
