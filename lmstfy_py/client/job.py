"""What the client returns: a `Job`, and the few small answers of the queue and dead-letter routes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

# A queue's counts read the same on both sides of the API: the client answers with the server's own types.
from lmstfy_py.types import DueBuckets as DueBuckets
from lmstfy_py.types import QueueStats as QueueStats


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the server described it, its data already decoded from base64.

    `ttl` is the seconds it has left, 0 when it never expires (Go lmstfy's 4294967295 reads as 0);
    `remain_tries` the deliveries left after this one (consume) or left now (peek). `attributes`
    is empty for a job published without any. The state fields are filled by `peek_job` on
    lmstfy-py (None elsewhere, and always None on Go lmstfy, which has no such fields).
    """

    id: str
    namespace: str
    queue: str
    data: bytes
    ttl: int = 0
    elapsed_ms: int = 0
    remain_tries: int = 0
    attributes: dict[str, str] = field(default_factory=dict)
    state: str | None = None  # delayed, ready, reserved or dead; an ended job's record: completed, expired, deleted
    due_ms: int | None = None  # unix ms: when a delayed job becomes ready, or a reservation ends
    attempts: int | None = None  # deliveries so far
    priority: int | None = None
    last_error: str | None = None  # the reason of its last release or bury
    result: bytes | None = None  # what its `complete` kept (None for any other end, and while it lives)
    finished_ms: int | None = None  # unix ms: when it ended; None while it lives
    group: str | None = None  # its group (SPEC 14), None without one
    # The W3C trace context it was published with (SPEC 15, lmstfy-py only), None without one: the
    # worker runs its handler inside it.
    traceparent: str | None = None
    tracestate: str | None = None

    def text(self, encoding: str = "utf-8") -> str:
        return self.data.decode(encoding)

    def json(self) -> Any:
        return json.loads(self.data)


# Each field's slot, set directly: see job_from.
_SETTERS = tuple(getattr(Job, found.name).__set__ for found in fields(Job))


def job_from(*values: Any) -> Job:
    """Job(*values) with every field given, in order, for half its CPU: a frozen dataclass's __init__
    sets each field through object.__setattr__, and a worker makes up to 100 Jobs per consume."""
    job: Job = object.__new__(Job)
    for set_field, value in zip(_SETTERS, values, strict=True):
        set_field(job, value)
    return job


@dataclass(frozen=True, slots=True)
class Released:
    """A release's outcome: ready again at `due_ms` with `remain_tries`, or `buried` (no try was left)."""

    buried: bool
    due_ms: int | None = None
    remain_tries: int | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """lmstfy's dead-letter peek: how many jobs are dead and the oldest one's id ("" when none)."""

    size: int
    head: str


@dataclass(frozen=True, slots=True)
class DeadJob:
    id: str
    data: bytes
    attempts: int
    last_error: str | None
    died_ms: int


@dataclass(frozen=True, slots=True)
class DeadPage:
    """One page of a dead letter, oldest first; `next` is the `after` of the next page (None: no more)."""

    jobs: list[DeadJob]
    next: str | None


@dataclass(frozen=True, slots=True)
class Scheduled:
    """A registration's outcome: `created` (False: it replaced a schedule of that name) and its first tick (unix ms)."""

    created: bool
    next_ms: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """A recurring job of a queue (SPEC section 9): `cron` (the expression, aliases expanded) or
    `every` (seconds) is set, the other None; `ttl`, `tries`, `priority` are those of each job it
    publishes; `last_ms` and `last_job_id` are None before its first job."""

    name: str
    cron: str | None
    every: int | None
    tz: str
    ttl: int
    tries: int
    priority: int
    catchup: str
    next_ms: int
    last_ms: int | None
    last_job_id: str | None
