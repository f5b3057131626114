"""Plain values passed between the web layer and the store."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Literal

from lmstfy_py import ids

# "unknown": a job still in lmstfy's layout (store/lmstfy_format.py), whose data is known, not its state.
# "completed", "expired", "deleted": ended jobs, shown by the record a job with a keep leaves (SPEC 13).
JobStateName = Literal["delayed", "ready", "reserved", "dead", "unknown", "completed", "expired", "deleted"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: a reservation that ends without ACK makes its job ready again after
    min(base_ms * 2^(attempts - 1), max_ms). A job without one has lmstfy's fixed backoff: ready
    again at once."""

    base_ms: int = 1000
    max_ms: int = 3_600_000

    def spec(self) -> str:
        """As the scripts keep it in the job (field b)."""
        return f"{self.base_ms}:{self.max_ms}"

    def delay_ms(self, attempts: int) -> int:
        """The wait after `attempts` deliveries (lua/_lib.lua's backoff_ms, for a pusher's failures)."""
        return int(min(self.base_ms * 2.0 ** min(max(attempts, 1) - 1, 62), self.max_ms))


@dataclass(frozen=True, slots=True)
class TraceContext:
    """W3C trace context a job keeps from its publish (SPEC 15), as sent: `traceparent` checked
    (`00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero), `tracestate` at most 512 bytes or None."""

    traceparent: str
    tracestate: str | None = None

    @property
    def sampled(self) -> bool:
        """Flags bit 01: the producer records this trace, so the server exports spans for the job."""
        return int(self.traceparent[53:55], 16) & 1 == 1

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    @property
    def parent_id(self) -> str:
        return self.traceparent[36:52]


@dataclass(frozen=True, slots=True)
class NewJob:
    """One job to publish; times are milliseconds inside the engine."""

    body: bytes
    ttl_ms: int = 86_400_000  # 0 = lives forever
    delay_ms: int = 0
    tries: int = 1
    # None: an unversioned job id and no attributes stored (lmstfy without Enable-Job-Version).
    attributes: dict[str, str] | None = None
    priority: int = 0  # 0..255, higher first; 0 keeps lmstfy's layout (the ready list)
    job_id: str | None = None  # chosen by the business; None: a new ULID
    unique_for_ms: int = 0  # how long the id stays taken after the job ended
    backoff: Backoff | None = None
    keep_s: int | None = None  # seconds its record is kept once it ended; None: the queue's keep, read at publish
    group: str | None = None  # SPEC 14: its group (validated by the web layer); None: none, never group-limited
    trace: TraceContext | None = None  # SPEC 15: kept with the job, returned with every delivery


@dataclass(frozen=True, slots=True)
class PusherWait:
    """How a pusher's consume differs from a client's: its deliveries use up no try (as lmstfy's: a
    pushed job is retried until its ttl), its long-poll ends with what it has once `interrupt` is set
    (the group's queues changed), and, holding no client, it looks at the queues without a wake-up
    only every `recheck_s` (a wake token lost with a crashed process is found then)."""

    interrupt: asyncio.Event
    recheck_s: float


@dataclass(frozen=True, slots=True)
class Published:
    job_id: str
    created: bool  # False: a job with this id was alive, or its id still taken: nothing was stored


@dataclass(frozen=True, slots=True)
class Job:
    """A job as a consumer or a peek sees it."""

    namespace: str
    queue: str
    job_id: str
    body: bytes
    ttl: int  # seconds it has left, 0 = no expiry
    remain_tries: int
    attributes: dict[str, str] | None
    attempts: int = 0  # deliveries so far (this one included, for a consume)
    created_ms: int | None = None  # None: unknown (not kept, and the id is not one of ours)
    trace: TraceContext | None = None  # SPEC 15: the trace context it was published with

    @property
    def elapsed_ms(self) -> int:
        if self.created_ms is not None:
            return max(0, time.time_ns() // 1_000_000 - self.created_ms)
        return ids.elapsed_ms(self.job_id) if ids.is_valid(self.job_id) else 0


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job looked up by id, with where it is in its life."""

    job: Job
    state: JobStateName
    due_ms: int | None  # when a delayed job becomes ready or a reservation ends
    priority: int
    last_error: str | None
    died_ms: int | None = None
    # A record of an ended job (state completed/expired/deleted): job.ttl is the record's seconds
    # left, attempts and last_error as at the end, due_ms None.
    result: bytes | None = None  # the complete's body; None for any other end, and while live
    finished_ms: int | None = None  # when it ended (unix ms); None while live
    group: str | None = None  # SPEC 14: the job's group; None without


@dataclass(frozen=True, slots=True)
class Released:
    """What a release did: the job is ready again at due_ms, or (buried) went to the dead letter."""

    buried: bool
    due_ms: int = 0
    remain_tries: int = 0


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's settings (SPEC 13), kept whether or not it holds jobs."""

    keep_s: int = 0  # 0..2_592_000: seconds an ended job's record is kept (0 = gone at once)
    events: int = 0  # 0..1_000_000: events kept (recorded from stage B on; stored and shown now)
    # SPEC 14 flow control
    max_reserved: int = 0  # 0..4_294_967_295: jobs reserved at once at most (0 = unlimited)
    rate: float = 0.0  # jobs/s delivered at most (0 = off)
    burst: int | None = None  # the token bucket's size; None: unset, then max(1, ceil(rate))
    group_concurrency: int = 1  # 1..65535: a group's jobs reserved at once at most


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """What a settings PUT sets (values validated by the web layer); None: not given, left as it is."""

    keep_s: int | None = None
    events: int | None = None
    max_reserved: int | None = None
    rate: str | None = None  # the validated decimal text as given ("0.5", "10"); "0" = off
    burst: int | None = None  # 0: unset it (back to the default); 1..1_000_000 set it
    group_concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded change of a job (SPEC 13 Events), as an event stream sends it."""

    cursor: str  # the SSE id: opaque, increasing; for a merged stream it covers every queue
    kind: str  # the SSE event name
    data: bytes  # the JSON object, as stored


@dataclass(frozen=True, slots=True)
class Gap:
    """Events of `queue` trimmed between the cursor given and the first one kept (SPEC 13 Stream)."""

    queue: str
    lost: int


@dataclass(frozen=True, slots=True)
class DueBuckets:
    """Delayed jobs by time left until due (SPEC 14), disjoint: <= 60 s, 60 s..1 h, 1 h..24 h, later.
    They sum to the queue's delayed count (JSON keys "1m", "1h", "1d", "later")."""

    within_1m: int = 0
    within_1h: int = 0
    within_1d: int = 0
    later: int = 0


@dataclass(frozen=True, slots=True)
class QueueStats:
    ready: int  # grouped ready jobs included
    delayed: int
    reserved: int
    dead: int
    paused: bool
    oldest_ready_ms: int | None = None  # unix ms since when the longest-waiting ready job is ready; None: none
    due: DueBuckets = DueBuckets()


@dataclass(frozen=True, slots=True)
class DeadJob:
    job_id: str
    body: bytes
    attempts: int
    last_error: str | None
    died_ms: int | None
    trace: TraceContext | None = None  # SPEC 15: the trace context it was published with


@dataclass(frozen=True, slots=True)
class DeadPage:
    jobs: list[DeadJob] = field(default_factory=list)
    next: str | None = None  # the id to pass as `after` for the next page; None: no more


@dataclass(frozen=True, slots=True)
class DeadLetterHead:
    size: int
    head: str  # oldest dead job id, "" when empty
