"""What the client returns for SPEC 13's job outcomes (lmstfy-py only): a result look-up and a queue's
settings, and the readers of those answers."""

from __future__ import annotations

from dataclasses import dataclass
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
    queue's events are kept (0: off)."""

    keep: int
    events: int


class SettingsArgs(TypedDict, total=False):
    """The settings `settings` may change: each one given is set, the others kept."""

    keep: int
    events: int


def read_outcome(answer: Answer) -> Outcome:
    """200: the job ended; 202: it has not (yet)."""
    return Outcome(calls.job_of(calls.success(answer)), answer.status == 200)


def read_settings(answer: Answer) -> Settings:
    fields = calls.success(answer)
    return Settings(int(fields["keep"]), int(fields["events"]))
