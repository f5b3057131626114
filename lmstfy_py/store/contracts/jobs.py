"""The contracts of the job steps: publish, reserve and a worker's verbs, and the reads of a queue.

Each NamedTuple lists a script's KEYS or ARGV in the script's order, named as its header names
them (tests/store/test_script_contracts.py); a last field typed as a tuple is the variadic rest.
The reply NamedTuples are what the scripts answer, field by field.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from lmstfy_py.store.scripts import Arg, Step, optional, rows, store_step


class NoArgs(NamedTuple):
    pass


class PublishKeys(NamedTuple):
    job: str
    timer: str
    registry: str
    tombstone: str
    ready: str
    priority: str
    wake: str
    meta: str
    dead: str
    settings: str
    replaces: tuple[str, ...]


class PublishArgs(NamedTuple):
    data: bytes
    ttl: int
    due: int
    tries: int
    namespace: str
    queue: str
    job_id: str
    created: int
    priority: int
    unique_for: int
    backoff: str
    keep: Arg
    group: str
    trace: str
    consume_deadline: int  # 0: no waiting consume to hand the job to
    most_jobs: int
    keep_tries: str
    replaces: tuple[str, ...]


class ReserveKeys(NamedTuple):
    timer: str
    per_queue: tuple[str, ...]


class ReserveArgs(NamedTuple):
    deadline: int
    most_jobs: int
    namespace: str
    prefix: str
    keep_tries: str
    queue_names: tuple[str, ...]


class Reserved(NamedTuple):
    queue: bytes
    job_id: bytes
    data: bytes
    pttl: int
    tries: int
    attempts: int
    created: Any


_reserved = rows(Reserved._make, len(Reserved._fields))


class ReserveReply(NamedTuple):
    jobs: list[Reserved]
    wake_at: int  # when a queue held back by its rate has its next token (ms; 0: none)


def _reserve_reply(reply: list[Any]) -> ReserveReply:
    return ReserveReply(_reserved(reply[0]), int(reply[1]))


class Made(NamedTuple):
    status: int  # 1 created, 2 created with a keep and a ttl (the pump ends it), 0 not created
    replaced: bytes | None  # field w of the job a republish replaced, when its trace is sampled
    handed: ReserveReply | None  # what was reserved for the waiting consume named, if one was


def _made(reply: int | list[Any]) -> Made:
    if isinstance(reply, int):
        return Made(reply, None, None)
    return Made(int(reply[0]), reply[1], _reserve_reply(reply[2]) if len(reply) > 2 else None)


RESERVE = store_step("reserve", ReserveKeys, ReserveArgs, _reserve_reply)
PUBLISH = store_step("publish", PublishKeys, PublishArgs, _made)
LMSTFY_RESERVE = store_step("lmstfy_reserve", ReserveKeys, ReserveArgs, _reserve_reply)


class AckKeys(NamedTuple):
    timer: str
    ready: str
    dead: str
    priority: str
    meta: str
    job_hashes: tuple[str, ...]


class AckArgs(NamedTuple):
    namespace: str
    queue: str
    job_ids: tuple[str, ...]


class Acked(NamedTuple):
    found: int
    traced: list[tuple[bytes, bytes]]  # (job id, field w) of each job removed with a sampled trace


def _acked(reply: int | list[Any]) -> Acked:
    if isinstance(reply, int):  # nothing traced
        return Acked(reply, [])
    found, flat = reply
    return Acked(int(found), list(zip(flat[::2], flat[1::2], strict=True)))


ACK = store_step("ack", AckKeys, AckArgs, _acked)


class VerbKeys(NamedTuple):
    """A job's hash and its namespace's timer (touch, job_state)."""

    job: str
    timer: str


class ReleaseKeys(NamedTuple):
    job: str
    timer: str
    ready: str
    priority: str
    wake: str
    meta: str
    dead: str


class ReleaseArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    now: int
    delay: Arg
    reason: str
    untried: int


class TouchArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    deadline: int


class BuryKeys(NamedTuple):
    job: str
    timer: str
    meta: str
    dead: str


class BuryArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    now: int
    reason: str


class Outcome(NamedTuple):
    """A verb's reply: {"released", due ms, remaining tries}, {"touched", due ms}, {"buried"}, {"missing"}..."""

    status: bytes
    due_ms: int = 0
    tries: int = 0
    trace: bytes | None = None  # field w of a job with a sampled trace (release, bury, complete; SPEC 15)


def _outcome(reply: list[Any]) -> Outcome:
    # Not Outcome._make: it takes no defaults, and only "released" answers all three fields.
    return Outcome(*reply)


class CompleteKeys(NamedTuple):
    job: str
    timer: str
    meta: str


class CompleteArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    now: int
    result: bytes


class WaitMarkKeys(NamedTuple):
    waiters: str


class WaitMarkArgs(NamedTuple):
    delta: int
    ms: int


WAIT_MARK = store_step("wait_mark", WaitMarkKeys, WaitMarkArgs, int)


class SettingsPutKeys(NamedTuple):
    settings: str
    events: str


class SettingsPutArgs(NamedTuple):
    settings: tuple[str | int, ...]  # name, value, name, value...


SETTINGS_PUT = store_step("settings_put", SettingsPutKeys, SettingsPutArgs, int)
RELEASE = store_step("release", ReleaseKeys, ReleaseArgs, _outcome)
COMPLETE = store_step("complete", CompleteKeys, CompleteArgs, _outcome)
TOUCH = store_step("touch", VerbKeys, TouchArgs, _outcome)
BURY = store_step("bury", BuryKeys, BuryArgs, _outcome)


class QueueKeys(NamedTuple):
    """The ready list and priority set of a queue (peek, next_jobs, size)."""

    ready: str
    priority: str


SIZE = store_step("size", QueueKeys, NoArgs, int)


class PeekArgs(NamedTuple):
    prefix: str
    most_elements: int


class Peeked(NamedTuple):
    job_id: bytes
    data: bytes
    pttl: int
    tries: int


PEEK = store_step("peek", QueueKeys, PeekArgs, optional(Peeked._make))


class NextArgs(NamedTuple):
    prefix: str
    jobs: int
    most_elements: int


class NextJob(NamedTuple):
    job_id: bytes
    data: bytes
    pttl: int
    tries: int
    priority: Any
    attempts: Any
    error: Any
    created: Any


NEXT_JOBS = store_step("next_jobs", QueueKeys, NextArgs, rows(NextJob._make, len(NextJob._fields)))


class JobStateArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str


class JobState(NamedTuple):
    data: bytes
    pttl: int
    tries: int
    state: Any
    priority: Any
    attempts: Any
    error: Any
    died: Any
    created: Any
    due: Any
    result: Any
    finished: Any
    group: Any


JOB_STATE = store_step("job_state", VerbKeys, JobStateArgs, optional(JobState._make))


class StatsKeys(NamedTuple):
    ready: str
    priority: str
    dead: str
    meta: str


class StatsArgs(NamedTuple):
    prefix: str


class ReadySince(NamedTuple):
    """A ready job that may be the queue's longest-waiting (stats.lua's candidates)."""

    job_id: bytes
    since: Any  # field y: when it became ready after its publish; None: at its publish
    created: Any  # field c; None: its id tells


class Counts(NamedTuple):
    ready: int
    delayed: int
    reserved: int
    dead: int
    paused: int
    grouped_since: Any  # the oldest grouped ready job's ready-since ms; None: none
    candidates: list[ReadySince]


def _counts(reply: list[Any]) -> Counts:
    ready, delayed, reserved, dead, paused, grouped_since, candidates = reply
    return Counts(ready, delayed, reserved, dead, paused, grouped_since, _ready_since(candidates))


_ready_since = rows(ReadySince._make, len(ReadySince._fields))


STATS = store_step("stats", StatsKeys, StatsArgs, _counts)


class PromoteArgs(NamedTuple):
    namespace: str
    queue: str
    job_id: str
    now: int


PROMOTE = store_step("promote", ReleaseKeys, PromoteArgs, _outcome)  # a release's keys: the job's and its queue's


class PauseKeys(NamedTuple):
    meta: str
    ready: str
    priority: str
    wake: str


class PauseArgs(NamedTuple):
    pause: str


PAUSE = store_step("pause", PauseKeys, PauseArgs, int)


ReserveStep = Step[ReserveKeys, ReserveArgs, ReserveReply]
