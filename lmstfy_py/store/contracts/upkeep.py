"""The contracts of the upkeep steps: dead letters, destroys and purges, pumps, schedules, lmstfy's layout.

As in contracts/jobs.py: KEYS and ARGV NamedTuples in the scripts' order, named as their headers
name them; a last field typed as a tuple is the variadic rest.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from lmstfy_py.store.contracts.jobs import Reserved
from lmstfy_py.store.scripts import Arg, rows, store_step

reserved_rows = rows(Reserved._make, len(Reserved._fields))  # reserve.lua's reply, as pump.lua hands it over


class Chunk(NamedTuple):
    """The reply of a chunked step: how many it did ({jobs dropped, moved...}), how many are left."""

    done: int
    left: int


class DestroyKeys(NamedTuple):
    list_or_set: str
    wake: str


class DestroyArgs(NamedTuple):
    prefix: str
    chunk: int
    kind: str
    record: str  # "1": a job with a keep leaves a deleted record (destroy); "0": none (purge)


DESTROY = store_step("destroy", DestroyKeys, DestroyArgs, Chunk._make)


class DeadKeys(NamedTuple):
    dead: str


class DeadPageArgs(NamedTuple):
    prefix: str
    page_size: int
    after: str


class DeadRow(NamedTuple):
    job_id: bytes
    data: bytes | None
    attempts: Any
    error: Any
    died: Any


class DeadRows(NamedTuple):
    more: int  # 1 or 0; -1: ARGV.after is not in the dead letter
    rows: list[DeadRow]


_dead_row_list = rows(DeadRow._make, len(DeadRow._fields))


def _dead_rows(flat: list[Any]) -> DeadRows:
    return DeadRows(flat[0], _dead_row_list(flat[1:]))


DEAD_PAGE = store_step("dead_page", DeadKeys, DeadPageArgs, _dead_rows)


class RespawnKeys(NamedTuple):
    dead: str
    ready: str
    priority: str
    wake: str
    meta: str


class RespawnArgs(NamedTuple):
    limit: int
    ttl: int
    prefix: str


RESPAWN = store_step("respawn", RespawnKeys, RespawnArgs, int)


class RespawnOneKeys(NamedTuple):
    job: str
    dead: str
    timer: str
    ready: str
    priority: str
    wake: str
    meta: str
    tombstone: str


class RespawnOneArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    ttl: int
    tries: int
    due: int


RESPAWN_ONE = store_step("respawn_one", RespawnOneKeys, RespawnOneArgs, bool)


class DeleteDeadArgs(NamedTuple):
    limit: int
    prefix: str


DELETE_DEAD = store_step("delete_dead", DeadKeys, DeleteDeadArgs, int)


class DeleteDeadOneKeys(NamedTuple):
    job: str
    dead: str


class DeleteDeadOneArgs(NamedTuple):
    job_id: str


DELETE_DEAD_ONE = store_step("delete_dead_one", DeleteDeadOneKeys, DeleteDeadOneArgs, bool)


class TimerKeys(NamedTuple):
    timer: str


class PurgeTimerArgs(NamedTuple):
    chunk: int
    prefix: str
    meta_prefix: str


PURGE_TIMER = store_step("purge_timer", TimerKeys, PurgeTimerArgs, Chunk._make)


class ForgetKeys(NamedTuple):
    timer: str
    registry: str


class ForgetArgs(NamedTuple):
    ready: str
    dead: str
    wake: str
    priority: str
    meta: str


FORGET_NAMESPACE = store_step("forget_namespace", ForgetKeys, ForgetArgs, bool)


class PumpKeys(NamedTuple):
    timer: str
    per_queue: tuple[str, ...]  # of each waiter handed due jobs: ready, priority, wake, meta per queue


class PumpArgs(NamedTuple):
    now: int
    most_members: int
    job: str
    ready: str
    dead: str
    wake: str
    priority: str
    meta: str
    namespace: str
    waiters: tuple[Arg, ...]  # per waiter: deadline, most jobs, keep tries, n queues, n names


class Pumped(NamedTuple):
    ready: int
    dead: int
    next_due: int
    handed: list[list[Reserved]]  # per waiter of PumpArgs.waiters, in order (fewer when nothing became ready)
    died: list[tuple[bytes, bytes, bytes]]  # (queue, job id, field w) of the jobs that died with a sampled trace


def _pumped(reply: list[Any]) -> Pumped:
    handed = [reserved_rows(out) for out in reply[3]]
    died = [(reply[4][i], reply[4][i + 1], reply[4][i + 2]) for i in range(0, len(reply[4]), 3)]
    return Pumped(int(reply[0]), int(reply[1]), int(reply[2]), handed, died)


PUMP = store_step("pump", PumpKeys, PumpArgs, _pumped)


class ScheduleKeys(NamedTuple):
    schedules: str
    ticks: str


class SchedulePutArgs(NamedTuple):
    field: str
    schedule: bytes
    first_tick: int
    most_schedules: int


SCHEDULE_PUT = store_step("schedule_put", ScheduleKeys, SchedulePutArgs, int)


class ScheduleDeleteKeys(NamedTuple):
    schedules: str
    ticks: str
    last_jobs: str


class ScheduleDeleteArgs(NamedTuple):
    field: str


SCHEDULE_DELETE = store_step("schedule_delete", ScheduleDeleteKeys, ScheduleDeleteArgs, bool)


class ScheduleFireKeys(NamedTuple):
    schedules: str
    ticks: str
    last_jobs: str
    job: str
    timer: str
    registry: str
    tombstone: str
    ready: str
    priority: str
    wake: str
    meta: str
    settings: str


class ScheduleFireArgs(NamedTuple):
    field: str
    schedule: bytes
    tick: int
    next_tick: int
    publish: str
    data: bytes
    ttl: int
    tries: int
    namespace: str
    queue: str
    job_id: str
    now: int
    priority: int


SCHEDULE_FIRE = store_step("schedule_fire", ScheduleFireKeys, ScheduleFireArgs, int)


class LmstfyDeadKeys(NamedTuple):
    lmstfy_dead: str
    dead: str


class LmstfyDeadArgs(NamedTuple):
    namespace: str
    queue: str
    most_elements: int
    now: int


LMSTFY_DEAD = store_step("lmstfy_dead", LmstfyDeadKeys, LmstfyDeadArgs, Chunk._make)


class LmstfyPumpArgs(NamedTuple):
    now: int
    most_members: int
    now_ms: int


class LmstfyPumped(NamedTuple):
    moved: int
    next_due_s: float


LMSTFY_PUMP = store_step("lmstfy_pump", TimerKeys, LmstfyPumpArgs, LmstfyPumped._make)


class DropKeys(NamedTuple):
    keys: tuple[str, ...]


class DropArgs(NamedTuple):
    mode: str
    arguments: tuple[Arg, ...]


def _dropped(reply: Any) -> Chunk:
    return Chunk._make(reply) if isinstance(reply, list) else Chunk(int(reply), 0)


LMSTFY_DROP = store_step("lmstfy_drop", DropKeys, DropArgs, _dropped)
