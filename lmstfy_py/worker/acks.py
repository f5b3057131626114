"""ACKs of finished jobs, gathered and sent with lmstfy-py's batch ACK, one request per queue and
100 jobs, while the worker goes on. A round waits up to LINGER_S for a queue's batch to fill
(a full batch goes at once), and the ids that finish while a round is in flight make the next
one: a busy worker sends one ACK per 100 jobs, not one per consume. A round that fails (server
away) is sent again with backoff, so an ACK is never dropped for an outage; if it still cannot
be sent when the worker stops, its job is delivered again after its ttr (at least once, never
lost). A stop lets the round in flight finish (`close`): cancelled, a round's ids were gone
before its requests were written, and its jobs stayed reserved until their ttr.

With `carry` (lmstfy-py's consume that ACKs, on by default), the worker's consumes take up to 100
waiting ids each (`consume`): a busy worker then sends one request per batch, and a round sends
only what no consume took within its linger (the consumes are long-polling, or stopped). Once a
consume came back with fewer jobs than it asked for, the queues ran dry and the next consumes
long-poll: no consume is about to carry, so a round lingers only LINGER_S (a worker running dry
ACKed its last jobs 50 ms late). A consume that fails puts its ids back (sent again, by a
consume or a round); one refused is logged as a refused round is. Ids are added once their
handler finished, so none is ACKed before."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Sequence

from lmstfy_py.client import AsyncClient, Job, LmstfyError, Throttled, Unavailable
from lmstfy_py.client.retry import backoff_delay
from lmstfy_py.client.routes import ACK_BATCH
from lmstfy_py.worker.pace import FETCHERS

log = logging.getLogger("lmstfy_py.worker")

BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0
# How long a round waits for more ids: far below any ttr, and it halved the ACK requests of a busy
# worker (a consume hands out at most the worker's free slots, often fewer than 100).
LINGER_S = 0.01
# With `carry`: a round waits this long after the last consume that took ids. Longer than the gap
# between a busy worker's consumes (10-20 ms measured, more on a loaded machine), so that a round
# sends only what the consumes are not about to carry; still far below any ttr.
CARRY_LINGER_S = 0.05
# With `carry`, a queue's ids go at once by batch ACK only past this many: more than the worker's
# consumes in flight carry. Sending each 100 at once cost a busy worker one batch ACK per five
# consumes (bench_worker.py, 50,000 jobs: 112 batch ACKs for 536 consumes).
CARRY_FULL = FETCHERS * ACK_BATCH


class AckBatcher:
    def __init__(self, client: AsyncClient, carry: bool = False) -> None:
        self._client = client
        self._carry = carry
        self._dry = False  # the last consume came back short: the next ones long-poll
        self._pending: defaultdict[str, list[str]] = defaultdict(list)  # queue -> job ids
        self._wake = asyncio.Event()
        self._full = asyncio.Event()  # some queue has `_full_at` ids waiting
        self._lingering: asyncio.Timeout | None = None  # a round's linger, while it lasts
        self._full_at = CARRY_FULL if carry else ACK_BATCH
        self._failures = 0  # rounds failed in a row
        self._closed = asyncio.Event()
        self.sent = 0  # jobs ACKed so far
        self.carries = 0  # consumes that carried ids

    def add(self, queue: str, job_id: str) -> None:
        ids = self._pending[queue]
        ids.append(job_id)
        self._wake.set()
        if len(ids) >= self._full_at:
            self._full.set()

    @property
    def waiting(self) -> int:
        return sum(map(len, self._pending.values()))

    async def run(self) -> None:
        """Sends rounds until close(); returns between rounds (flush() sends what is left)."""
        while not self._closed.is_set():
            await self._wake.wait()
            lingered = not self._full.is_set()
            if lingered:
                carries = self.carries
                lingered = await self._linger()
                if lingered and self.carries != carries and not self._closed.is_set():
                    continue  # a consume took ids meanwhile: those that came since wait a whole linger
            if self._closed.is_set():
                return
            self._wake.clear()
            # A batch that filled up goes at once; what is left of a queue waits for the next one.
            if not await self._round(whole_only=not lingered):
                delay = backoff_delay(self._failures - 1, BACKOFF_S, MAX_BACKOFF_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), delay)
                self._wake.set()

    async def _linger(self) -> bool:
        """Waits for some queue's batch to fill, up to the linger: whether it waited it out."""
        linger = CARRY_LINGER_S if self._carry and not self._dry else LINGER_S
        try:
            async with asyncio.timeout(linger) as self._lingering:
                await self._full.wait()
            return False
        except TimeoutError:
            return True
        finally:
            self._lingering = None

    def close(self) -> None:
        """run() returns once the round in flight, if any, is done."""
        self._closed.set()
        self._wake.set()
        self._full.set()

    async def flush(self, timeout: float) -> int:
        """At a stop, once run() returned: sends what waits, retrying for up to `timeout` seconds;
        how many ACKs are left unsent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._pending and not await self._round():
            left = deadline - loop.time()
            if left <= 0:
                break
            await asyncio.sleep(min(left, backoff_delay(self._failures - 1, BACKOFF_S, MAX_BACKOFF_S)))
        return self.waiting

    def _take(self, whole_only: bool) -> list[tuple[str, list[str]]]:
        """Batches of up to 100 ids of one queue; with `whole_only`, only full ones (the rest stays)."""
        batches = []
        for queue, ids in list(self._pending.items()):
            cut = len(ids) - len(ids) % ACK_BATCH if whole_only else len(ids)
            batches += [(queue, ids[i : i + ACK_BATCH]) for i in range(0, cut, ACK_BATCH)]
            if cut < len(ids):
                self._pending[queue] = ids[cut:]
            else:
                del self._pending[queue]
        self._full.clear()
        if self._pending:
            self._wake.set()
        return batches

    async def consume(
        self, consumer: AsyncClient, queues: Sequence[str], count: int, ttr: float, timeout: int
    ) -> list[Job]:
        """`consumer.consume_many`, carrying the ACKs waiting when `carry` is on."""
        carried = self._carried() if self._carry else []
        try:
            jobs = await consumer.consume_many(queues, count, ttr=ttr, timeout=timeout, ack=carried)
        except (Unavailable, Throttled):
            self._put_back(carried)
            raise
        except LmstfyError as exc:
            if carried:
                log.error(
                    "ACK of %d job(s) refused with a consume: %s; they will be delivered again", len(carried), exc
                )
            raise
        except BaseException:  # cancelled, or a failure of the client itself: ACKed or not, unknown
            self._put_back(carried)
            raise
        self.sent += len(carried)
        self._dry = len(jobs) < count
        if self._dry:
            self._cut_linger()
        return jobs

    def _cut_linger(self) -> None:
        """A round lingering for a consume to carry its ids would wait in vain: it lingers LINGER_S."""
        lingering = self._lingering
        # Expired: its end is already on its way (the round's task not yet resumed), and cannot move.
        if lingering is None or lingering.expired() or (ends := lingering.when()) is None:
            return
        lingering.reschedule(min(ends, asyncio.get_running_loop().time() + LINGER_S))

    def _carried(self) -> list[tuple[str, str]]:
        """Up to ACK_BATCH waiting ids, of any queues, oldest first; the rest stays."""
        taken: list[tuple[str, str]] = []
        for queue, ids in list(self._pending.items()):
            cut = ACK_BATCH - len(taken)
            taken += [(queue, job_id) for job_id in ids[:cut]]
            if cut < len(ids):
                self._pending[queue] = ids[cut:]
                break
            del self._pending[queue]
        if not self._any_full():
            self._full.clear()
        if not self._pending:
            self._wake.clear()
        self.carries += bool(taken)
        return taken

    def _any_full(self) -> bool:
        return any(len(ids) >= self._full_at for ids in self._pending.values())

    def _put_back(self, carried: list[tuple[str, str]]) -> None:
        """Ids a consume could not deliver, first in line again (an ACK sent twice does no harm)."""
        for queue, job_id in reversed(carried):
            self._pending[queue].insert(0, job_id)
        if carried:
            self._wake.set()
            if self._any_full():
                self._full.set()

    async def _round(self, whole_only: bool = False) -> bool:
        batches = self._take(whole_only)
        sent = await asyncio.gather(*(self._send(queue, ids) for queue, ids in batches))
        if all(sent):
            if self._failures:
                log.info("ACKs are sent again after %d failed rounds", self._failures)
            self._failures = 0
            return True
        self._failures += 1
        return False

    async def _send(self, queue: str, job_ids: list[str]) -> bool:
        try:
            await self._client.ack_many(queue, job_ids)
        except (Unavailable, Throttled) as exc:
            if self._failures == 0:
                log.warning("cannot ACK %d job(s) of %s: %s; retrying with backoff", len(job_ids), queue, exc)
            self._pending[queue][:0] = job_ids
            return False
        except LmstfyError as exc:
            # Refused (a revoked token, say): sending it again would be refused again. The jobs
            # come back after their ttr.
            log.error("ACK of %d job(s) of %s refused: %s; they will be delivered again", len(job_ids), queue, exc)
            return True
        self.sent += len(job_ids)
        return True
