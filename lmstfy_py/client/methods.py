"""Every data-plane method of Client and AsyncClient, declared once: its parameters, its
docstring and the `Call` it sends (routes.py builds it, calls.py reads its answer). core.py
makes each one blocking in Client (sync.py) and awaited in AsyncClient (aio.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from lmstfy_py.client.calls import Call
from lmstfy_py.client.core import Requests, request
from lmstfy_py.client.job import DeadLetter, DeadPage, Job, QueueStats, Released, Schedule, Scheduled
from lmstfy_py.client.outcomes import Outcome, Settings, SettingsArgs
from lmstfy_py.client.routes import AckIds, PublishArgs, PublishOptions, ScheduleArgs


class Methods(Requests):
    """The data-plane methods of one namespace's client."""

    # -- publish -----------------------------------------------------------------------------------

    @request
    def publish(
        self, queue: str, data: bytes | str, *, job_id: str | None = None, **options: Unpack[PublishArgs]
    ) -> Call[str]:
        """Publishes one job; its id. With `job_id` (the business's own id) a job with that id still
        alive in the queue makes this a duplicate: nothing is created and the id is returned."""
        return self.routes.publish(queue, data, PublishOptions(**options), job_id)

    @request
    def publish_many(
        self, queue: str, items: Sequence[Any], *, job_ids: Sequence[str] | None = None, **options: Unpack[PublishArgs]
    ) -> Call[list[str]]:
        """lmstfy's bulk publish: 1..64 JSON values, each value's JSON text one job's data; their ids."""
        return self.routes.publish_many(queue, items, PublishOptions(**options), job_ids)

    @request
    def republish(
        self, queue: str, old_id: str, data: bytes | str, *, job_id: str | None = None, **options: Unpack[PublishArgs]
    ) -> Call[str]:
        """ACKs job `old_id` and publishes `data` as a new job, in one step; the new id."""
        return self.routes.republish(queue, old_id, data, PublishOptions(**options), job_id)

    # -- consume and a worker's verbs --------------------------------------------------------------

    @request
    def consume(
        self, queues: str | Sequence[str], *, ttr: float | None = None, timeout: int = 0, ack: AckIds = ()
    ) -> Call[Job | None]:
        """Reserves the next job of the queues (the first listed wins) for `ttr` seconds, waiting up to
        `timeout` seconds for one; None when none came. `ack`: (queue, job id) pairs of the
        namespace, at most 100, ACKed first whatever the consume finds (lmstfy-py only: Go lmstfy
        ignores them)."""
        return self.routes.consume(queues, ttr, timeout, 1, ack).then(_first)

    @request
    def consume_many(
        self, queues: str | Sequence[str], count: int, *, ttr: float | None = None, timeout: int = 0, ack: AckIds = ()
    ) -> Call[list[Job]]:
        """Reserves up to `count` (1..100) jobs at once; [] when none came within `timeout`. `ack`:
        as consume's."""
        return self.routes.consume(queues, ttr, timeout, count, ack)

    @request
    def ack(self, queue: str, job_id: str) -> Call[None]:
        """The job is done: never delivered again (whether or not it still existed)."""
        return self.routes.ack(queue, job_id)

    @request
    async def ack_many(self, queue: str, job_ids: Sequence[str]) -> None:
        """ACKs jobs of one queue with lmstfy-py's batch ACK, 100 per request."""
        for call in self.routes.ack_many(queue, job_ids):
            await self._send(call)

    @request
    def release(
        self,
        queue: str,
        job_id: str,
        *,
        delay: float | None = None,
        reason: str | None = None,
        untried: bool = False,
    ) -> Call[Released]:
        """Ends the reservation: ready again after `delay` (None: the job's backoff), or buried when no
        try is left. `reason` (at most 1024 bytes) becomes its last error. `untried`: the job was
        not worked on, so its try and attempt are given back (lmstfy-py only)."""
        return self.routes.release(queue, job_id, delay, reason, untried)

    @request
    def touch(self, queue: str, job_id: str, *, ttr: float | None = None) -> Call[int]:
        """The reservation now ends `ttr` seconds from now; that time, in unix ms."""
        return self.routes.touch(queue, job_id, ttr)

    @request
    def bury(self, queue: str, job_id: str, *, reason: str | None = None) -> Call[None]:
        """Moves the reserved job to the dead letter now."""
        return self.routes.bury(queue, job_id, reason)

    # -- outcomes (lmstfy-py only) -----------------------------------------------------------------

    @request
    def complete(self, queue: str, job_id: str, *, result: bytes | str = b"") -> Call[None]:
        """The reserved job is done, with `result` (bytes, or str sent as UTF-8; at most 1 MiB): an ACK
        that keeps the result for `result()` to read while the job's record is kept (its `keep`)."""
        return self.routes.complete(queue, job_id, result)

    @request
    def result(self, queue: str, job_id: str, *, wait: int = 0) -> Call[Outcome]:
        """The job and whether it ended (completed, dead, expired or deleted), waiting up to `wait`
        seconds (0..600) for its end; NotFound when it is unknown or its record is gone."""
        return self.routes.result(queue, job_id, wait)

    @request
    def settings(self, queue: str, **changes: Unpack[SettingsArgs]) -> Call[Settings]:
        """The queue's settings, after setting those given (`keep` seconds, `events` kept; SPEC 14's
        `max_reserved`, `rate`, `burst` (None: unset it), `group_concurrency`). The server checks
        them all first: one bad value raises BadRequest and changes nothing."""
        return self.routes.settings(queue, changes)

    # -- flow control (lmstfy-py only) -------------------------------------------------------------

    @request
    def promote(self, queue: str, job_id: str) -> Call[None]:
        """The delayed job is ready now, as if it had come due (its priority and group kept); Conflict
        when it is not delayed (ready, reserved, dead), NotFound when there is no such job."""
        return self.routes.promote(queue, job_id)

    # -- look, count, drop --------------------------------------------------------------------------

    @request
    def peek(self, queue: str) -> Call[Job | None]:
        """The job a consumer would get next, not consumed; None when the queue is empty."""
        return self.routes.peek(queue)

    @request
    def peek_job(self, queue: str, job_id: str) -> Call[Job | None]:
        """A job whatever its state, with the state fields on lmstfy-py; None when it does not exist."""
        return self.routes.peek_job(queue, job_id)

    @request
    def size(self, queue: str) -> Call[int]:
        """Jobs ready now."""
        return self.routes.size(queue)

    @request
    def stats(self, queue: str) -> Call[QueueStats]:
        return self.routes.stats(queue)

    @request
    def destroy(self, queue: str) -> Call[None]:
        """Drops every ready job of the queue."""
        return self.routes.destroy(queue)

    @request
    def pause(self, queue: str) -> Call[None]:
        return self.routes.pause(queue, True)

    @request
    def resume(self, queue: str) -> Call[None]:
        return self.routes.pause(queue, False)

    # -- dead letter --------------------------------------------------------------------------------

    @request
    def dead_letter(self, queue: str) -> Call[DeadLetter]:
        return self.routes.dead_letter(queue)

    @request
    def dead_letter_size(self, queue: str) -> Call[int]:
        return self.routes.dead_letter_size(queue)

    @request
    def respawn(self, queue: str, *, limit: int = 1, ttl: int | None = None) -> Call[int]:
        """Moves up to `limit` dead jobs, oldest first, back to ready; how many moved."""
        return self.routes.respawn(queue, limit, ttl)

    @request
    def delete_dead(self, queue: str, *, limit: int = 1) -> Call[None]:
        return self.routes.delete_dead(queue, limit)

    @request
    def dead_jobs(self, queue: str, *, limit: int | None = None, after: str | None = None) -> Call[DeadPage]:
        """A page of dead jobs, oldest first, after job `after` (the previous page's `next`)."""
        return self.routes.dead_jobs(queue, limit, after)

    @request
    def respawn_dead_job(
        self, queue: str, job_id: str, *, ttl: int | None = None, tries: int | None = None, delay: float | None = None
    ) -> Call[None]:
        return self.routes.respawn_dead_job(queue, job_id, ttl, tries, delay)

    @request
    def delete_dead_job(self, queue: str, job_id: str) -> Call[None]:
        return self.routes.delete_dead_job(queue, job_id)

    # -- recurring jobs -----------------------------------------------------------------------------

    @request
    def schedule(self, queue: str, name: str, data: bytes | str, **options: Unpack[ScheduleArgs]) -> Call[Scheduled]:
        """Registers (or replaces) schedule `name` of the queue: a job of `data` at each tick of `cron`
        (5 fields or an @alias, read in `tz`) or `every` seconds (give one of them)."""
        return self.routes.schedule(queue, name, data, options)

    @request
    def schedules(self, queue: str) -> Call[list[Schedule]]:
        """The queue's schedules, by name."""
        return self.routes.schedules(queue)

    @request
    def get_schedule(self, queue: str, name: str) -> Call[Schedule | None]:
        """Schedule `name` of the queue, or None when there is none."""
        return self.routes.get_schedule(queue, name)

    @request
    def delete_schedule(self, queue: str, name: str) -> Call[None]:
        """No more ticks (the jobs it published stay); NotFound when there is no such schedule."""
        return self.routes.delete_schedule(queue, name)


def _first(jobs: list[Job]) -> Job | None:
    return jobs[0] if jobs else None
