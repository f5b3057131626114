"""Due jobs handed by the timer pump straight to this process's waiting consumes.

A long-polling consume (Engine.consume) joins the Handover of its engine with a Mailbox saying
what it asks for (queues, ttr, count, frozen). The pump (Engine.pump) passes the mailboxes of the
namespace it serves to pump.lua, which reserves the jobs it made ready for them in the same
step, as reserve.lua would; the pump then puts each one's jobs in its mailbox and the consume
answers them: no wake token, no BRPOP return, no reserve of its own between "due" and
"reserved". A handed job is reserved in Redis before it is in a mailbox, so a crash gives it back
at its ttr. A consume that has gone by the time its jobs arrive (timed out, disconnected) never
sees them: whoever finds them unanswered gives them back at once (Engine._give_back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from lmstfy_py.types import Job

MOST_WAITERS = 32  # mailboxes one pump call serves (the longest-waiting first)


class Mailbox:
    """What one consume asks for, and the jobs handed to it that it has not answered yet."""

    __slots__ = ("count", "frozen", "jobs", "queues", "ttr_ms", "waiting", "woken")

    def __init__(self, queues: Sequence[str], ttr_ms: int, count: int, frozen: bool) -> None:
        self.queues = tuple(queues)
        self.ttr_ms = ttr_ms
        self.count = count
        self.frozen = frozen
        self.jobs: list[Job] = []
        self.waiting = False  # between its consume's attempts: may be handed jobs
        # Its consume's wait on the wake hub (WakeHub.wait), settled when jobs arrive: no task of its own.
        self.woken: asyncio.Future[None] | None = None

    def take(self) -> list[Job]:
        jobs, self.jobs = self.jobs, []
        return jobs


class Handover:
    """The mailboxes of one engine's waiting consumes, by namespace, in the order they joined."""

    def __init__(self) -> None:
        # An insertion-ordered dict as an ordered set: leaving costs O(1) however many wait.
        self._waiting: dict[str, dict[Mailbox, None]] = {}

    def join(self, ns: str, mailbox: Mailbox) -> None:
        """The consume waits now (again): the pump may hand it jobs. Joins once per consume."""
        mailbox.waiting = True
        self._waiting.setdefault(ns, {})[mailbox] = None

    def leave(self, ns: str, mailbox: Mailbox) -> list[Job]:
        """Its consume ends; answers the jobs handed to it that it did not take (to give back)."""
        mailboxes = self._waiting.get(ns)
        if mailboxes is not None and mailboxes.pop(mailbox, 0) is None and not mailboxes:
            del self._waiting[ns]
        mailbox.waiting = False
        return mailbox.take()

    def waiters(self, ns: str) -> list[Mailbox]:
        """The mailboxes the pump may hand the namespace's due jobs to: waiting and empty."""
        found: list[Mailbox] = []
        for mailbox in self._waiting.get(ns, ()):
            if mailbox.waiting and not mailbox.jobs:
                found.append(mailbox)
                if len(found) == MOST_WAITERS:
                    break
        return found

    def deliver(self, ns: str, mailbox: Mailbox, jobs: list[Job]) -> bool:
        """Puts jobs reserved for `mailbox` in it; False when its consume has left (give them back)."""
        if mailbox not in self._waiting.get(ns, ()):
            return False
        mailbox.jobs.extend(jobs)
        if mailbox.woken is not None and not mailbox.woken.done():
            mailbox.woken.set_result(None)
        return True
