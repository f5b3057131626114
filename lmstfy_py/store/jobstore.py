"""The contract between the web layer and a pool's storage: every job operation a request makes.

One implementation: `Engine` (store/engine.py), one pool; a pool still holding lmstfy's layout is
served by its Engine with a Layout (store/layout.py). A pool moving to another one is served by
`MigrationEngine` (store/migration.py), which implements no operation: it routes each to one or
both pools' Engines by lmstfy's rules. `JobStore` is the one or the other, not a Protocol: a
Protocol restated every operation's signature a third time (the issue-26 count of places written
twice), and mypy holds each call against both classes all the same.
`Pools.get` answers a JobStore; the timer pumps, health checks and metrics collector work on
each pool's own Engine (`Pools.engines`).

Times are milliseconds. Operations on one job by id raise NotFound (404) when there is no such
job, Conflict (409) when it is not in the state they need; Redis errors propagate (503). The rules
every implementation keeps, beyond what a signature says:

- `consume(..., acks=)`: the ids (queue -> job ids) are ACKed as ack_many would, before anything
  is reserved.
- `peek_job`: a job by id, whatever its state; also the record of an ended job still kept (SPEC 13).
- `set_queue_settings`: sets those given (values already validated by the web layer) and answers
  all of them. A change that lets held jobs go (a limit raised or lifted) wakes the queue's
  consumers in the same step.
- `promote` (SPEC 14): a delayed job is ready now, as if it had come due (priority and group kept;
  event `promoted`). NotFound("job not found"); Conflict("job is not delayed") for a ready,
  reserved or dead job (or a record).
- `groups_in_flight`: how many of the queue's groups have a job reserved (or holding its slot
  through a release delay).
- `complete`: an ACK that keeps `result`: NotFound (404 "job not found"), Conflict("job is not
  reserved") when the job is not reserved (also an ended job still kept).
- `result`: (ended, info): ended True once the job is completed, dead, expired or deleted (at
  once, or as soon as it is within wait_ms); else False with its current info after wait_ms.
  NotFound when unknown or past its keep. A waiter present at the end gets the end even with keep
  0. Every waiter is answered within 50 ms of the end; when the pool stops (SIGTERM,
  stop_waiting) each waiter answers at once with (False, current info).
- `open_events`: the event stream of `queues` (SPEC 13 Stream): await it, then iterate what it
  answers. Awaiting it checks everything first (so the web layer answers 4xx before any byte):
  Conflict("events are off for this queue") if any queue's `events` is 0;
  InvalidParameter("invalid after") if `after` is not a cursor of these queues. after None: only
  events after this call; "0": every kept event, then live; a cursor: exactly the events after
  it, none lost or repeated, with a Gap first (per queue) when the next ones were trimmed. Live
  events arrive within ~50 ms of their step. Yields None after `idle_s` without an event (the web
  layer writes an SSE comment). Ends (StopAsyncIteration) when the pool stops (stop_waiting:
  SIGTERM). One queue: cursors are that queue's; several (1..16, the merged namespace stream):
  each cursor says every queue's position (for this list of queues, in this order), order kept
  per queue. The iterator is an async generator: aclose() it (or let it end) to leave the live
  tail.
"""

from __future__ import annotations

from typing import TypeAlias

from lmstfy_py.store.engine import Engine
from lmstfy_py.store.migration import MigrationEngine

JobStore: TypeAlias = Engine | MigrationEngine
