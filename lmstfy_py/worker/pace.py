"""How many jobs a worker holds beyond its running ones (its prefetch) when left to choose, and
how many consumes it keeps in flight (FETCHERS), which bound that buffer (MAX_AUTO_PREFETCH).

A fixed buffer is wrong for someone: the concurrency's worth starves quick handlers (they finish
it long before the next consume comes back, and wait), while a large one lets slow handlers hoard
jobs another worker could run. So the buffer follows what it is for: the jobs the handlers finish
during ROUND_TRIPS consume round trips, both measured as the worker runs and smoothed. Never less
than the concurrency (the buffer of a worker that has measured nothing yet), never more than
MAX_AUTO_PREFETCH. With quick handlers the buffer grows until the consumes in flight, not the
buffer, bound the pace; slow ones keep the concurrency's worth, as a fixed default would, and the
buffer grows past it only by what they get through in two round trips.

A measure above what was known is taken at once, a lower one smoothed: the handlers did finish
that many (a rate is never over-measured), and while the buffer is what bounds them each window
measures only what it let through, so a smoothed rise took the buffer four windows or more to
reach a quick worker's pace (docs/PERFORMANCE.md, "A worker's start and end"). A fall is smoothed
so that one quiet window does not shrink it.
"""

from __future__ import annotations

import math

# Consumes a worker keeps in flight at most (run.py's consume loops), each for up to `count` of the
# free room and each on a connection of its own. Once the server and Redis are the busy part, they
# set the pace: with fsync always, each turn of Redis's event loop ends in an fsync, and more
# consumes in flight put more of them into each turn. Twelve against six: 3.3 turns per 1,000 jobs
# against 5.5 and 1.06x the jobs per second (four alternated runs, 2026-11-28, docs/PERFORMANCE.md,
# "Twelve consumes in flight"); each consume then takes about twice as long, which the buffer
# covers. With 128 jobs in flight no-op handlers ran at ~0.5x the batch clients' pace, with six
# consumes of 100 0.73-0.77x, 0.83-0.90x since the client's consumes run on httptools.
FETCHERS = 12
# Room for FETCHERS consumes of 100 (the server's largest): the cap of quick handlers' buffer.
MAX_AUTO_PREFETCH = FETCHERS * 100
ROUND_TRIPS = 2
RATE_WINDOW_S = 0.1  # handler completions are counted over windows at least this long
SMOOTHING = 0.3  # weight of a lower measure against what was known


class Pace:
    """The handlers' pace and the consumes' round trip, and the buffer they call for."""

    def __init__(self, concurrency: int, now: float) -> None:
        self.floor = concurrency
        self.rate = 0.0  # jobs per second the handlers finish
        self.round_trip = 0.0  # seconds a consume that got all it asked for took
        self._window_start = now
        self._finished = 0  # handlers ended in the current window

    def finished(self) -> None:
        self._finished += 1

    def consumed(self, seconds: float) -> None:
        """A consume that got every job it asked for: its time is the round trip, no long-poll wait."""
        self.round_trip = _smooth(self.round_trip, seconds)

    def prefetch(self, now: float) -> int:
        elapsed = now - self._window_start
        if elapsed >= RATE_WINDOW_S:
            self.rate = _smooth(self.rate, self._finished / elapsed)
            self._window_start, self._finished = now, 0
        wanted = math.ceil(ROUND_TRIPS * self.rate * self.round_trip)
        return max(self.floor, min(MAX_AUTO_PREFETCH, wanted))


def _smooth(known: float, measured: float) -> float:
    return measured if measured >= known else known + SMOOTHING * (measured - known)
