"""Jobs handed by the timer pump and by publishes straight to this process's waiting consumes.

A long-polling consume (Engine.consume) joins the Handover of its engine with a Mailbox saying
what it asks for (queues, ttr, count, frozen). The pump (Engine.pump) passes the mailboxes of the
namespace it serves to pump.lua, which reserves the jobs it made ready for them in the same
step, as reserve.lua would; a publish of a job ready now passes one mailbox waiting on its
queue alone to publish.lua, which does the same. The caller then puts each one's jobs in its
mailbox and the consume answers them: no wake token, no BRPOP return, no reserve of its own
between "ready" and "reserved". A handed job is reserved in Redis before it is in a mailbox, so a
crash gives it back at its ttr. A consume that has gone by the time its jobs arrive (timed out,
disconnected) never sees them: whoever finds them unanswered gives them back at once
(Engine._give_back).

A mailbox is claimed by one step at a time (`claim`, until `deliver` or `unclaim`): two steps in
flight for one consume would hand it more jobs than its count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from lmstfy_py.types import Job

MOST_WAITERS = 32  # mailboxes one pump call serves (the longest-waiting first)


class Mailbox:
    """What one consume asks for, and the jobs handed to it that it has not answered yet."""

    __slots__ = ("claimed", "count", "frozen", "jobs", "queues", "ttr_ms", "waiting", "woken")

    def __init__(self, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool) -> None:
        self.queues = tuple(queues)
        self.ttr_ms = ttr_ms
        self.count = count
        self.frozen = frozen
        self.jobs: list[Job] = []
        self.waiting = False  # between its consume's attempts: may be handed jobs
        self.claimed = False  # a step that may hand it jobs is in flight
        # Its consume's wait on the wake hub (WakeHub.wait), settled when jobs arrive: no task of its own.
        self.woken: asyncio.Future[None] | None = None

    @property
    def free(self) -> bool:
        """Waiting, empty and not claimed: a step may hand it jobs."""
        return self.waiting and not self.jobs and not self.claimed

    def take(self) -> list[Job]:
        jobs, self.jobs = self.jobs, []
        return jobs


class Handover:
    """The mailboxes of one engine's waiting consumes, by namespace, in the order they joined."""

    def __init__(self) -> None:
        # An insertion-ordered dict as an ordered set: leaving costs O(1) however many wait. Read
        # by a publish (`ns in by_namespace`) before it calls claim(): most publishes find nobody.
        self.by_namespace: dict[str, dict[Mailbox, None]] = {}

    def join(self, ns: str, mailbox: Mailbox) -> None:
        """The consume waits now (again): the pump may hand it jobs. Joins once per consume."""
        mailbox.waiting = True
        self.by_namespace.setdefault(ns, {})[mailbox] = None

    def leave(self, ns: str, mailbox: Mailbox) -> list[Job]:
        """Its consume ends; answers the jobs handed to it that it did not take (to give back)."""
        mailboxes = self.by_namespace.get(ns)
        if mailboxes is not None and mailboxes.pop(mailbox, 0) is None and not mailboxes:
            del self.by_namespace[ns]
        mailbox.waiting = False
        return mailbox.take()

    def claim(self, ns: str, most: int = MOST_WAITERS, queue: str | None = None) -> list[Mailbox]:
        """Up to `most` mailboxes a step may hand the namespace's jobs to, the longest-waiting
        first: waiting, empty and not claimed; with `queue`, waiting on that queue alone. They are
        claimed until delivered to or unclaimed."""
        found: list[Mailbox] = []
        waiting = self.by_namespace.get(ns)
        if not waiting:
            return found
        for mailbox in waiting:
            if mailbox.free and (queue is None or mailbox.queues == (queue,)):
                mailbox.claimed = True
                found.append(mailbox)
                if len(found) == most:
                    break
        return found

    def waits_on(self, ns: str, queues: Sequence[str]) -> bool:
        """Whether a consume waits on `queues` if it is one queue, and on that queue alone."""
        mailboxes = self.by_namespace.get(ns)
        if not mailboxes or len(queues) != 1:
            return False
        alone = (queues[0],)
        return any(mailbox.waiting and mailbox.queues == alone for mailbox in mailboxes)

    @staticmethod
    def unclaim(mailboxes: Sequence[Mailbox]) -> None:
        for mailbox in mailboxes:
            mailbox.claimed = False

    def deliver(self, ns: str, mailbox: Mailbox, jobs: list[Job]) -> bool:
        """Puts jobs reserved for `mailbox` in it; False when its consume has left (give them back)."""
        mailbox.claimed = False
        if mailbox not in self.by_namespace.get(ns, ()):
            return False
        mailbox.jobs.extend(jobs)
        if mailbox.woken is not None and not mailbox.woken.done():
            mailbox.woken.set_result(None)
        return True
