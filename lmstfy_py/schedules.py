"""Recurring jobs (SPEC section 9): what a schedule is and when its ticks fall. No Redis here.

A schedule publishes one job per tick into its queue: ticks come from a 5-field cron expression
read in a time zone (cronsim, the parser Healthchecks.io runs: standard syntax with L, W and #,
and Debian cron's rules at DST changes: a time skipped by a spring-forward runs right after the
gap, a time repeated by a fall-back runs once, while an hourly or finer job runs in both hours),
or from a fixed interval anchored at the registration (every=S: ticks at t0+S, t0+2S, ...).

Late or missed: a tick fired at most `grace_ms` after it falls is fired as usual (a busy
server, a restart); one older than that was missed (no server ran) and follows the catch-up
policy: "one" fires one job for all the missed ticks, "none" skips them. Either way the next
tick is the first one after now.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any, Literal

import msgpack
from cronsim import CronSim, CronSimError

from lmstfy_py.errors import Conflict, InvalidParameter

Catchup = Literal["one", "none"]
CATCHUPS: tuple[Catchup, ...] = ("one", "none")
MAX_EVERY_S = 366 * 86400
MIN_GRACE_MS = 5_000  # a tick this late is still fired on its own, however short the period
MAX_GRACE_MS = 60_000  # a daily job late by a deploy is not "missed"
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FORMAT = 1  # of the packed spec, for a later change of it
# IANA names are ASCII letters, digits, "_", "-" and "+" in "/"-separated parts, the longest 32
# characters ("America/Argentina/ComodRivadavia"): nothing else reaches zoneinfo, which opens files.
_TZ_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
MAX_TZ_CHARS = 64
_SHOWN_TZ_CHARS = 64  # of a refused name, in the error


class TooManySchedules(Conflict):
    """The namespace holds the most schedules it may (SPEC section 9): a new one is refused, 409."""

    def __init__(self, maximum: int) -> None:
        super().__init__(f"too many schedules in namespace (max {maximum})")


@dataclass(frozen=True, slots=True)
class Schedule:
    """One registration: when (cron in tz, or every S seconds) and the job each tick publishes."""

    name: str
    queue: str
    cron: str | None
    every_s: int | None
    tz: str
    body: bytes
    ttl_ms: int
    tries: int
    priority: int
    catchup: Catchup

    def following(self, tick_ms: int, after_ms: int) -> int:
        """The first tick after `after_ms` (and after `tick_ms`, a tick of this schedule)."""
        after_ms = max(tick_ms, after_ms)
        if self.every_s is not None:
            step = self.every_s * 1000
            return tick_ms + ((after_ms - tick_ms) // step + 1) * step
        return _next_cron(self.cron or "", self.tz, after_ms)

    def first(self, now_ms: int) -> int:
        """The first tick of a schedule registered at `now_ms`."""
        if self.every_s is not None:
            return now_ms + self.every_s * 1000
        return _next_cron(self.cron or "", self.tz, now_ms)

    def grace_ms(self, tick_ms: int) -> int:
        """How late a tick may fire and still count as fired rather than missed."""
        period = self.following(tick_ms, tick_ms) - tick_ms
        return min(max(period, MIN_GRACE_MS), MAX_GRACE_MS)

    def packed(self) -> bytes:
        spec = [FORMAT, self.cron, self.every_s, self.tz, self.body, self.ttl_ms, self.tries, self.priority]
        data: bytes = msgpack.packb([*spec, self.catchup], use_bin_type=True)
        return data

    def shown(self) -> dict[str, Any]:
        """As the API lists it (without the state, which the store adds)."""
        return {
            "name": self.name,
            "cron": self.cron,
            "every": self.every_s,
            "tz": self.tz,
            "ttl": self.ttl_ms // 1000,
            "tries": self.tries,
            "priority": self.priority,
            "catchup": self.catchup,
        }


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A schedule with what the store knows of it: its next tick, its last job."""

    schedule: Schedule
    next_ms: int
    last_ms: int | None
    last_job_id: str | None

    def shown(self) -> dict[str, Any]:
        return {
            **self.schedule.shown(),
            "next_ms": self.next_ms,
            "last_ms": self.last_ms,
            "last_job_id": self.last_job_id,
        }


def unpacked(queue: str, name: str, data: bytes) -> Schedule:
    _, cron, every_s, tz, body, ttl_ms, tries, priority, catchup = msgpack.unpackb(data, raw=False)
    return Schedule(name, queue, cron, every_s, tz, body, ttl_ms, tries, priority, catchup)


def cron_expression(text: str) -> str:
    """The expression, aliases expanded; 400 for one cronsim refuses, and for @reboot."""
    expression = ALIASES.get(text.strip().lower(), text.strip())
    if expression.startswith("@"):
        raise InvalidParameter(f"invalid cron: {text!r} (no such alias; @reboot means nothing to a queue)")
    try:
        CronSim(expression, dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        raise InvalidParameter(f"invalid cron: {text!r} ({exc})") from None
    if len(expression.split()) != 5:
        raise InvalidParameter(f"invalid cron: {text!r} (5 fields: minute hour day month weekday)")
    return expression


def time_zone(name: str) -> str:
    """The name of an IANA time zone, else 400.

    zoneinfo reads the name as a path under its TZPATH: a folder ("America"), an overlong name, a
    path with ".." or a NUL byte fail there in every way (ValueError, KeyError, OSError), and an
    OSError would read as a Redis outage (503, store/faults.py). So only what an IANA name looks
    like goes to zoneinfo, and whatever it raises is the same 400.
    """
    if len(name) <= MAX_TZ_CHARS and _TZ_NAME.fullmatch(name):
        try:
            zoneinfo.ZoneInfo(name)
        except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
            pass
        else:
            return name
    shown = name if len(name) <= _SHOWN_TZ_CHARS else name[:_SHOWN_TZ_CHARS] + "..."
    raise InvalidParameter(f"invalid tz: {shown!r} is not an IANA time zone (like Europe/Paris)")


def _next_cron(expression: str, tz: str, after_ms: int) -> int:
    start = dt.datetime.fromtimestamp(after_ms / 1000, zoneinfo.ZoneInfo(tz))
    try:
        return int(next(CronSim(expression, start)).timestamp() * 1000)
    except StopIteration:  # "0 0 30 2 *": a day that never comes
        raise InvalidParameter(f"the cron {expression!r} never fires") from None
