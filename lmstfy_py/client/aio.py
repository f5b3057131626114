"""`AsyncClient`: the asyncio twin of `Client` (sync.py), method for method; both send the same
`Call`s (routes.py) and read the answers alike (calls.py)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpcore

from lmstfy_py.client.asyncio_backend import AsyncioBackend
from lmstfy_py.client.calls import Call
from lmstfy_py.client.connection import Endpoint, answer_of, pool_options
from lmstfy_py.client.errors import LmstfyError
from lmstfy_py.client.job import DeadLetter, DeadPage, Job, QueueStats, Released, Schedule, Scheduled
from lmstfy_py.client.retry import TRANSPORT_ERRORS, RetryPolicy, transport_failure
from lmstfy_py.client.routes import PublishArgs, PublishOptions, Routes, ScheduleArgs

T = TypeVar("T")


class AsyncClient:
    """Client's methods, awaited: a client of one namespace over one pool of keep-alive connections,
    for one event loop. Use it as an async context manager, or await `close()`.

    `url` is the data API (`http://host:7777`; https with `ssl_context`, or the system's CAs).
    `timeout` bounds connecting, each read and each write (a long-poll's read gets its wait on
    top). Failed requests are retried as retry.py says: `retries` more attempts, backing off from
    `backoff` seconds up to `max_backoff`.
    """

    def __init__(
        self,
        url: str,
        namespace: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.namespace = namespace
        self.routes = Routes(namespace)
        self.retry = RetryPolicy(retries, backoff, max_backoff)
        self._endpoint = Endpoint.of(url, token, timeout)
        self._pool = httpcore.AsyncConnectionPool(**pool_options(ssl_context), network_backend=AsyncioBackend())

    async def close(self) -> None:
        await self._pool.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(self, call: Call[T]) -> T:
        """Sends `call`, retrying as self.retry allows; its answer as read, or the client's exception."""
        attempt = 0
        while True:
            try:
                answer = answer_of(
                    await self._pool.request(
                        call.method,
                        self._endpoint.url(call),
                        headers=self._endpoint.request_headers(call),
                        content=call.body,
                        extensions=self._endpoint.extensions(call),
                    )
                )
            except TRANSPORT_ERRORS as exc:
                failure: LmstfyError = transport_failure(exc)
            else:
                if answer.status != 503:
                    return call.read(answer)
                failure = answer.error()
            delay = self.retry.delay(attempt, failure, call.repeatable)
            if delay is None:
                raise failure
            await asyncio.sleep(delay)
            attempt += 1

    # -- publish -----------------------------------------------------------------------------------

    async def publish(
        self, queue: str, data: bytes | str, *, job_id: str | None = None, **options: Unpack[PublishArgs]
    ) -> str:
        """Publishes one job; its id. With `job_id` (the business's own id) a job with that id still
        alive in the queue makes this a duplicate: nothing is created and the id is returned."""
        return await self.send(self.routes.publish(queue, data, PublishOptions(**options), job_id))

    async def publish_many(
        self, queue: str, items: Sequence[Any], *, job_ids: Sequence[str] | None = None, **options: Unpack[PublishArgs]
    ) -> list[str]:
        """lmstfy's bulk publish: 1..64 JSON values, each value's JSON text one job's data; their ids."""
        return await self.send(self.routes.publish_many(queue, items, PublishOptions(**options), job_ids))

    async def republish(
        self, queue: str, old_id: str, data: bytes | str, *, job_id: str | None = None, **options: Unpack[PublishArgs]
    ) -> str:
        """ACKs job `old_id` and publishes `data` as a new job, in one step; the new id."""
        return await self.send(self.routes.republish(queue, old_id, data, PublishOptions(**options), job_id))

    # -- consume and a worker's verbs --------------------------------------------------------------

    async def consume(self, queues: str | Sequence[str], *, ttr: float | None = None, timeout: int = 0) -> Job | None:
        """Reserves the next job of the queues (the first listed wins) for `ttr` seconds, waiting up to
        `timeout` seconds for one; None when none came."""
        jobs = await self.send(self.routes.consume(queues, ttr, timeout, 1))
        return jobs[0] if jobs else None

    async def consume_many(
        self, queues: str | Sequence[str], count: int, *, ttr: float | None = None, timeout: int = 0
    ) -> list[Job]:
        """Reserves up to `count` (1..100) jobs at once; [] when none came within `timeout`."""
        return await self.send(self.routes.consume(queues, ttr, timeout, count))

    async def ack(self, queue: str, job_id: str) -> None:
        """The job is done: never delivered again (whether or not it still existed)."""
        await self.send(self.routes.ack(queue, job_id))

    async def ack_many(self, queue: str, job_ids: Sequence[str]) -> None:
        """ACKs jobs of one queue with lmstfy-py's batch ACK, 100 per request."""
        for call in self.routes.ack_many(queue, job_ids):
            await self.send(call)

    async def release(
        self,
        queue: str,
        job_id: str,
        *,
        delay: float | None = None,
        reason: str | None = None,
        untried: bool = False,
    ) -> Released:
        """Ends the reservation: ready again after `delay` (None: the job's backoff), or buried when no
        try is left. `reason` (at most 1024 bytes) becomes its last error. `untried`: the job was
        not worked on, so its try and attempt are given back (lmstfy-py only)."""
        return await self.send(self.routes.release(queue, job_id, delay, reason, untried))

    async def touch(self, queue: str, job_id: str, *, ttr: float | None = None) -> int:
        """The reservation now ends `ttr` seconds from now; that time, in unix ms."""
        return await self.send(self.routes.touch(queue, job_id, ttr))

    async def bury(self, queue: str, job_id: str, *, reason: str | None = None) -> None:
        """Moves the reserved job to the dead letter now."""
        await self.send(self.routes.bury(queue, job_id, reason))

    # -- look, count, drop --------------------------------------------------------------------------

    async def peek(self, queue: str) -> Job | None:
        """The job a consumer would get next, not consumed; None when the queue is empty."""
        return await self.send(self.routes.peek(queue))

    async def peek_job(self, queue: str, job_id: str) -> Job | None:
        """A job whatever its state, with the state fields on lmstfy-py; None when it does not exist."""
        return await self.send(self.routes.peek_job(queue, job_id))

    async def size(self, queue: str) -> int:
        """Jobs ready now."""
        return await self.send(self.routes.size(queue))

    async def stats(self, queue: str) -> QueueStats:
        return await self.send(self.routes.stats(queue))

    async def destroy(self, queue: str) -> None:
        """Drops every ready job of the queue."""
        await self.send(self.routes.destroy(queue))

    async def pause(self, queue: str) -> None:
        await self.send(self.routes.pause(queue, True))

    async def resume(self, queue: str) -> None:
        await self.send(self.routes.pause(queue, False))

    # -- dead letter --------------------------------------------------------------------------------

    async def dead_letter(self, queue: str) -> DeadLetter:
        return await self.send(self.routes.dead_letter(queue))

    async def dead_letter_size(self, queue: str) -> int:
        return await self.send(self.routes.dead_letter_size(queue))

    async def respawn(self, queue: str, *, limit: int = 1, ttl: int | None = None) -> int:
        """Moves up to `limit` dead jobs, oldest first, back to ready; how many moved."""
        return await self.send(self.routes.respawn(queue, limit, ttl))

    async def delete_dead(self, queue: str, *, limit: int = 1) -> None:
        await self.send(self.routes.delete_dead(queue, limit))

    async def dead_jobs(self, queue: str, *, limit: int | None = None, after: str | None = None) -> DeadPage:
        """A page of dead jobs, oldest first, after job `after` (the previous page's `next`)."""
        return await self.send(self.routes.dead_jobs(queue, limit, after))

    async def respawn_dead_job(
        self, queue: str, job_id: str, *, ttl: int | None = None, tries: int | None = None, delay: float | None = None
    ) -> None:
        await self.send(self.routes.respawn_dead_job(queue, job_id, ttl, tries, delay))

    async def delete_dead_job(self, queue: str, job_id: str) -> None:
        await self.send(self.routes.delete_dead_job(queue, job_id))

    # -- recurring jobs -----------------------------------------------------------------------------

    async def schedule(self, queue: str, name: str, data: bytes | str, **options: Unpack[ScheduleArgs]) -> Scheduled:
        """Registers (or replaces) schedule `name` of the queue: a job of `data` at each tick of `cron`
        (5 fields or an @alias, read in `tz`) or `every` seconds (give one of them)."""
        return await self.send(self.routes.schedule(queue, name, data, options))

    async def schedules(self, queue: str) -> list[Schedule]:
        """The queue's schedules, by name."""
        return await self.send(self.routes.schedules(queue))

    async def get_schedule(self, queue: str, name: str) -> Schedule | None:
        """Schedule `name` of the queue, or None when there is none."""
        return await self.send(self.routes.get_schedule(queue, name))

    async def delete_schedule(self, queue: str, name: str) -> None:
        """No more ticks (the jobs it published stay); NotFound when there is no such schedule."""
        await self.send(self.routes.delete_schedule(queue, name))
