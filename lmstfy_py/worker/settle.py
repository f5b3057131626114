"""A job's outcome sent back to the server: the result of a handler that returned one, the release or
burial of a failed handler's job, and the give-back (untried, or at a stop) of a job another worker
should have.

A send is repeated only while its failure proves it never reached the server: a repeat of one
that did could end another worker's reservation of the job.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lmstfy_py.client import AsyncClient, Bury, Job, LmstfyError, Released, Unavailable
from lmstfy_py.client.retry import backoff_delay
from lmstfy_py.worker.handlers import MAX_REASON_BYTES, failure_reason, truncate_utf8, where

log = logging.getLogger("lmstfy_py.worker")
T = TypeVar("T")

BACKOFF_S = 0.1  # the first pause after a failed request; doubled up to MAX_BACKOFF_S
MAX_BACKOFF_S = 5.0
SETTLE_ATTEMPTS = 5  # a release or bury that provably never reached the server is sent up to this often
# A stop's releases in flight at once: sent all together, the hundreds a busy worker holds opened
# up to 100 connections (the client's pool) to the server.
GIVE_BACKS_AT_ONCE = 16
STOPPED_REASON = "the worker stopped before the handler finished"


class Settler:
    """Releases, buries and gives back the jobs of one run, on its client."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.give_backs = asyncio.Semaphore(GIVE_BACKS_AT_ONCE)

    async def release(self, job: Job, failure: Exception) -> None:
        reason = failure_reason(failure)
        what = f"job {job.id} of {job.queue} failed at {where(failure)}: {reason}"
        try:
            released = await self._settle(lambda: self.client.release(job.queue, job.id, reason=reason))
        except LmstfyError as exc:
            log.warning("%s; not released (%s): it comes back after its ttr", what, exc)
            return
        log.warning("%s; %s", what, _released_text(released))

    async def complete(self, job: Job, result: bytes) -> None:
        """ACKs the job with its handler's result (lmstfy-py's complete). Refused (a result over 1 MiB,
        say) or never sent, the job comes back after its ttr."""
        try:
            await self._settle(lambda: self.client.complete(job.queue, job.id, result=result))
        except LmstfyError as exc:
            log.warning("job %s of %s: complete (%d bytes of result) failed: %s", job.id, job.queue, len(result), exc)

    async def bury(self, job: Job, bury: Bury) -> None:
        reason = truncate_utf8(bury.reason, MAX_REASON_BYTES)
        try:
            await self._settle(lambda: self.client.bury(job.queue, job.id, reason=reason or None))
        except LmstfyError as exc:
            log.warning("job %s of %s: bury (%s) failed: %s", job.id, job.queue, reason, exc)
            return
        log.warning("job %s of %s buried: %s", job.id, job.queue, reason or "(no reason)")

    async def _settle(self, send: Callable[[], Awaitable[T]], until: float = math.inf) -> T:
        """Sends a release or bury, again only while the failure proves it never reached the server
        (a repeat of one that did could end another worker's reservation of the job) and before
        `until` (loop time; past it the reservation may have ended, and the job be another's)."""
        for attempt in range(SETTLE_ATTEMPTS - 1):
            delay = backoff_delay(attempt, BACKOFF_S, MAX_BACKOFF_S)
            try:
                return await send()
            except Unavailable as exc:
                if exc.sent or self.loop.time() + delay >= until:
                    raise
            await asyncio.sleep(delay)
        return await send()

    async def give_back_untried(self, job: Job, until: float = math.inf) -> None:
        """Ready again at once with its try and attempt given back (and no new last error): its
        handler never ran."""
        try:
            async with self.give_backs:
                if self.loop.time() >= until:  # queued too long behind other releases: it may be another's now
                    log.warning("job %s of %s not started; not released in time: it comes back", job.id, job.queue)
                    return
                await self._settle(lambda: self.client.release(job.queue, job.id, delay=0, untried=True), until)
        except LmstfyError as exc:
            log.warning(
                "job %s of %s not started; not released (%s): it comes back after its ttr", job.id, job.queue, exc
            )

    async def give_back(self, job: Job) -> None:
        """Ready again at once for another worker (a job with no try left goes to the dead letter)."""
        try:
            async with self.give_backs:
                released = await self._settle(
                    lambda: self.client.release(job.queue, job.id, delay=0, reason=STOPPED_REASON)
                )
        except LmstfyError as exc:
            log.warning(
                "job %s of %s did not finish; not released (%s): it comes back after its ttr", job.id, job.queue, exc
            )
            return
        log.warning(
            "job %s of %s did not finish within the grace period; %s", job.id, job.queue, _released_text(released)
        )


def _released_text(released: Released) -> str:
    if released.buried:
        return "no try left: now in the dead letter"
    wait_s = max(0, (released.due_ms or 0) - time.time() * 1000) / 1000
    return f"released: ready again in {wait_s:.1f} s ({released.remain_tries} tries left)"
