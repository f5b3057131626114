"""One run of a Worker: its loops on one event loop, and the jobs in hand.

- FETCHERS (pace.py) consume loops keep up to `concurrency + prefetch` jobs in hand (each consume
  at most `count`), long-polling `poll` seconds. A job starts its handler when a slot is free, else waits
  in the prefetch buffer: the next consume's round trip then overlaps the handlers' work instead
  of leaving slots idle. Without a fixed `prefetch` the buffer follows the handlers' pace
  (pace.py). While every slot has a job in hand, a fetcher waits until room for half a consume
  is free: asking for each freed slot at once sent a quarter of all consumes for 1-9 jobs.
- A handler that returns None has its job ACKed in a batch (acks.py), carried by the next consume
  where it can; one that returns a value completes it with that result (lmstfy-py's complete,
  SPEC 13; handlers.result_body); one that raises `Bury` buries
  it; one that raises anything else releases it, so that the job's backoff applies, with the
  exception as its last error.
- The lease keeper touches the running jobs held past half their ttr. A job still waiting for a
  slot at that point goes back untried (its try and attempt given back, ready at once) for
  another worker, before its reservation ends: touching it kept jobs reserved by a worker whose
  handlers had all hung while other workers sat idle. Its place in the buffer goes with it until
  a handler ends (`stale`): a wedged worker holds only its running jobs, never consuming what it
  cannot start (consumes already in flight may bring a few back once), and a slow one holds
  more again only as its handlers get through jobs.
- A stop: no new consume, but the long-polls in flight are waited for (at most `poll` seconds):
  the server does not notice a client that left a long-poll, and would reserve the next job for
  it, stuck until its ttr. Jobs still waiting are released at once, untried (their try given
  back). Handlers get `grace` seconds; the jobs of those still running are released at once for
  another worker, and their late results are ignored.

Releases, burials and give-backs are sent by settle.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from lmstfy_py.client import AsyncClient, Bury, Job, LmstfyError, Throttled, Unavailable
from lmstfy_py.client.http11 import wake_first
from lmstfy_py.client.retry import backoff_delay
from lmstfy_py.worker.acks import AckBatcher
from lmstfy_py.worker.handlers import result_body
from lmstfy_py.worker.metrics import Recorder
from lmstfy_py.worker.pace import Pace
from lmstfy_py.worker.records import Running, Settings, Tally
from lmstfy_py.worker.settle import BACKOFF_S, MAX_BACKOFF_S, Settler
from lmstfy_py.worker.settle import STOPPED_REASON as STOPPED_REASON  # imported from here by callers

log = logging.getLogger("lmstfy_py.worker")

MIN_TOUCH_PERIOD_S = 0.05
ACK_FLUSH_S = 10.0  # at a stop, how long ACKs that cannot be sent are retried


class Run:
    """One run of a Worker: its loops and the jobs in hand."""

    def __init__(
        self,
        settings: Settings,
        client: AsyncClient,
        consumers: Sequence[AsyncClient],
        call: Callable[[Job], Awaitable[Any]],
        metrics: Recorder,
        tally: Tally,
    ) -> None:
        self.w = settings
        self.tally = tally
        self.client = client  # ACKs, releases, buries, touches
        self.consumers = consumers  # one per consume loop
        self.call = call
        self.metrics = metrics
        self.loop = asyncio.get_running_loop()
        self.acks = AckBatcher(client, carry=settings.ack_with_consume)
        self.running: set[Running] = set()
        self.waiting: deque[Running] = deque()  # reserved, their handlers not started: the prefetch
        self.requested = 0  # jobs asked for by the consumes in flight
        self.stale = 0  # buffer places taken by jobs given back for waiting too long; a handler's end frees one
        # The slots, and the give-backs: a stop waits for them to settle their jobs.
        self.tasks: set[asyncio.Task[None]] = set()
        self.idle_slots: deque[asyncio.Future[None]] = deque()  # each woken alone, as fetchers are
        self.wake_due = False  # a wake-up of idle slots is scheduled
        self.slot_freed = asyncio.Event()  # in a stop: a handler ended, or the stop hurries
        # Fetchers waiting for room, each woken alone: waking them all at every handler's end cost
        # more than the consumes.
        self.idle_fetchers: deque[asyncio.Future[None]] = deque()
        self.stopping = asyncio.Event()
        self.hurry = False
        self.deadline = math.inf  # loop time when the grace ends
        self.crash: BaseException | None = None
        self.pace = Pace(settings.concurrency, self.loop.time())
        self.settler = Settler(client)

    def request_stop(self) -> None:
        if self.stopping.is_set():
            log.info("stopping now: the %d running handler(s) get no more grace", len(self.running))
            self.hurry = True
        else:
            self.deadline = self.loop.time() + self.w.grace
            log.info("stopping: no new jobs; %d running handler(s) get %g s to finish", len(self.running), self.w.grace)
        self.stopping.set()
        self.slot_freed.set()
        while self.idle_fetchers:
            wake_first(self.idle_fetchers)
        while self.idle_slots:
            wake_first(self.idle_slots)

    async def run(self) -> None:
        log.info(
            "worker on %s/%s: concurrency %d, ttr %g s, %s handler",
            self.w.namespace,
            ",".join(self.w.queues),
            self.w.concurrency,
            self.w.ttr,
            "async" if self.w.async_handler else "sync",
        )
        for _ in range(self.w.concurrency):
            self._track(self._slot())
        fetchers = [self._guarded(self._fetch(consumer)) for consumer in self.consumers]
        acks, leases = self._guarded(self.acks.run()), self._guarded(self._keep_leases())
        await self.stopping.wait()
        self._give_back_waiting()
        await asyncio.gather(*fetchers)
        self._give_back_waiting()  # what the last long-polls brought
        await self._drain()
        leases.cancel()
        self.acks.close()
        # The ACK round in flight ends (its requests have their own timeouts); cancelled, it dropped its ids.
        if not (await asyncio.wait([acks], timeout=ACK_FLUSH_S))[0]:
            log.warning(
                "an ACK round did not end within %g s: its jobs will be delivered again after their ttr", ACK_FLUSH_S
            )
            acks.cancel()
        await asyncio.gather(acks, leases, return_exceptions=True)
        if self.tasks:  # handlers that ended are settling their jobs (release, bury)
            await asyncio.wait(self.tasks, timeout=self.w.timeout)
        unsent = await self.acks.flush(ACK_FLUSH_S)
        if unsent:
            log.warning("%d ACK(s) could not be sent: those jobs will be delivered again after their ttr", unsent)
        t = self.tally
        log.info("worker stopped: %d processed, %d failed, %d given back", t.processed, t.failed, t.given_back)
        if self.crash is not None:
            raise self.crash

    def _guarded(self, work: Awaitable[None]) -> asyncio.Task[None]:
        """A loop that ends by an error stops the worker (gracefully), which then raises that error."""

        async def guard() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.crash is None:
                    self.crash = exc
                    log.error("worker stopping on an error: %s", exc, exc_info=not isinstance(exc, LmstfyError))
                self.request_stop()

        return self.loop.create_task(guard())

    # -- consuming -------------------------------------------------------------------------------

    async def _fetch(self, consumer: AsyncClient) -> None:
        """One of FETCHERS consume loops, each on a client (a connection) of its own: together they
        keep up to that many consumes in flight, never holding more than `concurrency + prefetch`
        jobs (running, waiting, asked for)."""
        failures = 0
        while not self.stopping.is_set():
            count = self._consume_size()
            if not count:
                room = self.loop.create_future()
                self.idle_fetchers.append(room)
                await room
                continue
            self.requested += count
            sent = self.loop.time()
            try:
                jobs = await self.acks.consume(consumer, self.w.queues, count, self.w.ttr, self.w.poll)
            except (Unavailable, Throttled) as exc:
                # Any other error (401, 404 pool not found, 400) will not pass by itself: it stops the worker.
                failures += 1
                if failures == 1:
                    log.warning("cannot consume: %s; retrying with backoff", exc)
                await self._pause(backoff_delay(failures - 1, BACKOFF_S, MAX_BACKOFF_S))
                continue
            finally:
                self.requested -= count
            if failures:
                log.info("consuming again after %d failed attempt(s)", failures)
                failures = 0
            now = self.loop.time()
            if len(jobs) == count:
                self.pace.consumed(now - sent)
            self.waiting.extend(Running(job, now + self.w.ttr / 2, sent + self.w.ttr) for job in jobs)
            if jobs and self.idle_slots:
                wake_first(self.idle_slots)  # which wakes more once its handler waits (_slot)

    def _prefetch(self) -> int:
        """Jobs to hold beyond the concurrency, before the places of jobs given back as stale."""
        fixed = self.w.prefetch
        return self.pace.prefetch(self.loop.time()) if fixed is None else fixed

    def _consume_size(self) -> int:
        """How many jobs the next consume asks for; 0: not yet (less than half a consume of room
        while every slot has a job in hand)."""
        limit = self.w.concurrency + max(0, self._prefetch() - self.stale)
        in_hand = len(self.running) + len(self.waiting) + self.requested
        free = limit - in_hand
        if free <= 0:
            return 0
        # A slot that no job in hand will fill asks at once: waiting for half a consume of room
        # would leave it idle (the buffer is empty when its jobs were given back as stale).
        starved = in_hand < self.w.concurrency
        return min(free, self.w.count) if starved or free >= min(self.w.count, limit) // 2 else 0

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    # -- the slots -------------------------------------------------------------------------------

    async def _slot(self) -> None:
        """One of `concurrency` handler slots: runs the waiting jobs one after another until the stop.
        A task per job cost a busy worker a quarter of its own CPU (docs/PERFORMANCE.md)."""
        slot = asyncio.current_task()
        while not self.stopping.is_set():
            if not self.waiting:
                free = self.loop.create_future()
                self.idle_slots.append(free)
                await free
                continue
            running = self.waiting.popleft()
            running.task = slot
            self.running.add(running)
            if self.waiting and self.idle_slots and not self.wake_due:
                # The other idle slots are woken once this one waits: a handler that does not wait
                # lets this slot run the whole consume, with no other slot woken for nothing.
                self.wake_due = True
                self.loop.call_soon(self._wake_slots)
            try:
                await self._handle(running)
            except Exception:
                log.exception("job %s of %s: the worker failed to settle it", running.job.id, running.job.queue)

    def _wake_slots(self) -> None:
        self.wake_due = False
        for _ in range(min(len(self.waiting), len(self.idle_slots))):
            wake_first(self.idle_slots)

    def _track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task the stop waits for (self.tasks): a slot, or a give-back."""
        task = self.loop.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # -- one job ---------------------------------------------------------------------------------

    async def _handle(self, running: Running) -> None:
        job = running.job
        started = time.perf_counter()
        failure: Exception | None = None
        result: bytes | None = None
        try:
            result = result_body(await self.call(job))
        except Exception as exc:
            failure = exc
        finally:
            self.running.discard(running)
            self.pace.finished()
            if self.stale:
                self.stale -= 1  # a job went through: the buffer may hold one more again
            if self.stopping.is_set():
                self.slot_freed.set()
            elif self.idle_fetchers and self._consume_size():
                wake_first(self.idle_fetchers)
        if running.abandoned:
            return  # released at the stop: another worker may have it by now
        seconds = time.perf_counter() - started
        if failure is None:
            self.metrics.done(job.queue, seconds)
            self.tally.processed += 1
            if result is None:
                self.acks.add(job.queue, job.id)
            else:
                await self.settler.complete(job, result)
            return
        self.tally.failed += 1
        if isinstance(failure, Bury):
            self.metrics.failed(job.queue, seconds, "bury")
            await self.settler.bury(job, failure)
        else:
            self.metrics.failed(job.queue, seconds, "release")
            await self.settler.release(job, failure)

    # -- leases ----------------------------------------------------------------------------------

    async def _keep_leases(self) -> None:
        period = max(self.w.ttr / 4, MIN_TOUCH_PERIOD_S)
        while True:
            await asyncio.sleep(period)
            now = self.loop.time()
            self._give_back_stale(now)
            due = [r for r in self.running if r.touch_at <= now and not r.abandoned]
            if due:
                await asyncio.gather(*(self._touch(r, now, period) for r in due))

    def _give_back_stale(self, now: float) -> None:
        """Jobs that waited half their ttr for a slot go back untried, with their buffer places:
        touched, they stayed with a worker whose handlers had all hung."""
        expired = 0
        # Jobs wait in the order they came, so the oldest are first.
        while self.waiting and self.waiting[0].touch_at <= now:
            held = self.waiting.popleft()
            held.abandoned = True
            expired += 1
            self.tally.given_back += 1
            self._track(self.settler.give_back_untried(held.job, until=held.lease_ends))
        if expired:
            # Never more places than the buffer has: one handler's end then lets the worker consume again.
            self.stale = min(self.stale + expired, self._prefetch())
            log.warning(
                "%d job(s) waited half their ttr for a slot (%d handler(s) running): given back untried",
                expired,
                len(self.running),
            )

    async def _touch(self, running: Running, now: float, period: float) -> None:
        job = running.job
        running.touch_at = now + self.w.ttr / 2
        running.lease_ends = now + self.w.ttr
        try:
            await self.client.touch(job.queue, job.id, ttr=self.w.ttr)
        except (Unavailable, Throttled):
            running.touch_at = now + period  # again at the next look
        except LmstfyError as exc:
            log.warning(
                "job %s of %s: its reservation could not be kept (%s): it may be delivered again",
                job.id,
                job.queue,
                exc,
            )

    # -- the stop --------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Waits for the running handlers until the grace ends; releases the jobs of the others."""
        while self.running and not self.hurry:
            left = self.deadline - self.loop.time()
            if left <= 0:
                break
            self.slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.slot_freed.wait(), left)
        unfinished = list(self.running)
        for running in unfinished:
            running.abandoned = True
            if running.task is not None:
                running.task.cancel()  # an async handler stops; a sync one's thread runs on, ignored
        self.tally.given_back += len(unfinished)
        await asyncio.gather(*(self.settler.give_back(r.job) for r in unfinished))

    def _give_back_waiting(self) -> None:
        """The jobs whose handlers never started go back at once, untried, while the stop goes on."""
        if self.waiting:
            log.info("giving back %d job(s) whose handlers had not started", len(self.waiting))
        while self.waiting:
            held = self.waiting.popleft()
            held.abandoned = True
            self.tally.given_back += 1
            self._track(self.settler.give_back_untried(held.job))
