"""What the client returns for SPEC 13's job outcomes (lmstfy-py only): a result look-up and a queue's
settings (with SPEC 14's flow-control limits), and the readers of those answers."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple, TypedDict

from lmstfy_py.client import calls
from lmstfy_py.client.calls import Answer
from lmstfy_py.client.job import Job


class Outcome(NamedTuple):
    """A `result` look-up: the job as it is (its record once it ended) and whether it `ended`
    (completed, dead, expired or deleted)."""

    job: Job
    ended: bool


@dataclass(frozen=True, slots=True)
class Settings:
    """A queue's settings: `keep`, seconds an ended job's record is kept; `events`, how many of the
    queue's events are kept (0: off); SPEC 14's limits: `max_reserved` jobs reserved at once (0:
    unlimited), `rate` jobs delivered a second (0: off) from a bucket of `burst` tokens (None: unset,
    the server's max(1, ceil(rate))), `group_concurrency` jobs of one group reserved at once.
    The limits' defaults are the server's, so a queue without them compares equal to `Settings(keep, events)`."""

    keep: int
    events: int
    max_reserved: int = 0
    rate: float = 0.0
    burst: int | None = None
    group_concurrency: int = 1


class SettingsArgs(TypedDict, total=False):
    """The settings `settings` may change: each one given is set, the others kept. `rate` is sent as
    decimal text (a str as given: "0.5"); `burst=None` unsets the burst (back to the default)."""

    keep: int
    events: int
    max_reserved: int
    rate: float | str
    burst: int | None
    group_concurrency: int


def setting_params(changes: SettingsArgs) -> dict[str, str]:
    """The query of a settings PUT: `burst=None` goes as an empty `burst=` (the server's "unset"),
    a float rate as plain decimal digits (never "1e-05", which the server refuses)."""
    params: dict[str, str] = {}
    for name, value in changes.items():
        if value is None:
            params[name] = ""
        elif isinstance(value, float):
            params[name] = format(Decimal(repr(value)), "f")
        else:
            params[name] = str(value)
    return params


def read_outcome(answer: Answer) -> Outcome:
    """200: the job ended; 202: it has not (yet)."""
    return Outcome(calls.job_of(calls.success(answer)), answer.status == 200)


def read_settings(answer: Answer) -> Settings:
    fields = calls.success(answer)
    burst = fields.get("burst")
    return Settings(
        int(fields["keep"]),
        int(fields["events"]),
        int(fields.get("max_reserved", 0)),
        float(fields.get("rate", 0)),
        None if burst is None else int(burst),
        int(fields.get("group_concurrency", 1)),
    )
