"""What a run is given and what it keeps: its Settings, each job in hand (Running), and its Tally."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lmstfy_py.client import Job


@dataclass(frozen=True, slots=True)
class Settings:
    """What a run needs of its Worker."""

    namespace: str
    queues: list[str]
    concurrency: int
    prefetch: int | None  # None: it follows the handlers' pace (pace.py)
    ttr: float
    count: int
    grace: float
    poll: int
    timeout: float  # of each request: how long the stop waits for settling releases
    async_handler: bool
    ack_with_consume: bool = True  # finished jobs' ACKs ride on the next consume (acks.py)


@dataclass(eq=False, slots=True)
class Running:
    """A job in hand: waiting for a slot, then running (`task`); `abandoned` once the stop released it."""

    job: Job
    touch_at: float  # loop time of the next touch; waiting: when it goes back untried
    lease_ends: float  # loop time before which its reservation cannot end (a consume's or touch's send + ttr)
    task: asyncio.Task[None] | None = None
    abandoned: bool = False


@dataclass
class Tally:
    processed: int = 0
    failed: int = 0
    given_back: int = 0
