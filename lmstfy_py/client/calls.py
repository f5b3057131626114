"""A request to send and how to read its answer (`Call`), shared by Client and AsyncClient.

Reading is where lmstfy's conventions are known: an error is JSON under "error" (or "msg"
for "no job available" and throttling, "err" for some of Go lmstfy's 500s), a consume that
finds nothing answers 404 {"msg": ...}, data is standard base64, and Go lmstfy reports a job
that never expires with ttl 4294967295.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from lmstfy_py.client.errors import LmstfyError, ServerError, error_for
from lmstfy_py.client.job import Job, job_from

T = TypeVar("T")
U = TypeVar("U")

NEVER_EXPIRES_GO = 4294967295  # Go lmstfy's ttl for a job without one (its uint32 of -1)
ERROR_KEYS = ("error", "msg", "err")


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    request_id: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        # orjson: a worker reads up to 100 jobs an answer, in a third of json.loads's time. It raises
        # a ValueError (JSONDecodeError) where json.loads does, and also on what no server here sends:
        # NaN, lone surrogates, whole numbers past 64 bits.
        return orjson.loads(self.body)

    def fields(self) -> dict[str, Any]:
        """The JSON object of the answer; {} when it is not one (an empty body, an HTML proxy page)."""
        try:
            found = self.json()
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def message(self) -> str:
        fields = self.fields()
        for key in ERROR_KEYS:
            if isinstance(fields.get(key), str):
                return str(fields[key])
        text = " ".join(self.body.decode(errors="replace").split())[:200]
        return text or f"HTTP {self.status}"

    def error(self) -> LmstfyError:
        return error_for(self.status, self.message(), self.request_id)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One HTTP request and the reader of its answer.

    `repeatable`: sending it again after its answer was lost (or a 503) is safe, because a repeat
    changes nothing the first did not (reads, ACKs, a publish with a business job_id) or because
    the route is at-least-once anyway (a consume whose answer was lost: its jobs come back after
    their ttr). `wait_s`: how long the server may hold the answer (a long-poll), added to the
    read timeout.
    """

    method: str
    path: str
    reader: Callable[[Answer], T]
    params: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    repeatable: bool = True
    wait_s: float = 0.0

    def read(self, answer: Answer) -> T:
        try:
            return self.reader(answer)
        except LmstfyError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ServerError(f"unexpected answer: {exc!r}", answer.status, answer.request_id) from exc

    def then(self, step: Callable[[T], U]) -> Call[U]:
        """This request, its answer read on by `step`."""
        reader = self.reader

        def read(answer: Answer) -> U:
            return step(reader(answer))

        return Call(self.method, self.path, read, self.params, self.body, self.headers, self.repeatable, self.wait_s)


# -- readers -------------------------------------------------------------------------------------


def success(answer: Answer) -> Any:
    """The answer's JSON, or the error it carries."""
    if not answer.ok:
        raise answer.error()
    return answer.json()


def nothing(answer: Answer) -> None:
    if not answer.ok:
        raise answer.error()


def base64_data(text: str | None) -> bytes:
    return binascii.a2b_base64(text or "")  # Go lmstfy answers null for an empty body


def _optional_data(text: str | None) -> bytes | None:
    return None if text is None else base64_data(text)


_State = tuple[Any, Any, Any, Any, Any, Any, Any, Any]  # Job's fields from `state` to `group`
NO_STATE: _State = (None, None, None, None, None, None, None, None)


def job_of(fields: dict[str, Any]) -> Job:
    """The Job of lmstfy's job object (and lmstfy-py's state fields where present).

    Written for speed, as a worker reads up to 100 per consume: one positional call, the state
    fields read only when the answer has them.
    """
    ttl = fields.get("ttl") or 0
    attributes = fields.get("attributes")
    state: _State = (
        (
            fields["state"],
            fields.get("due_ms"),
            fields.get("attempts"),
            fields.get("priority"),
            fields.get("last_error"),
            _optional_data(fields.get("result")),
            fields.get("finished_ms"),
            fields.get("group"),
        )
        if "state" in fields
        else NO_STATE
    )
    return job_from(
        fields["job_id"],
        fields["namespace"],
        fields["queue"],
        base64_data(fields.get("data")),
        0 if ttl == NEVER_EXPIRES_GO else ttl,
        fields.get("elapsed_ms") or 0,
        fields.get("remain_tries") or 0,
        dict(attributes) if attributes else {},
        *state,
        fields.get("traceparent"),
        fields.get("tracestate"),
    )


def no_job(answer: Answer) -> bool:
    """A consume's "no job available": 404 under "msg"; a 404 under "error" (no such pool) is an error."""
    if answer.status != 404:
        return False
    fields = answer.fields()
    return "msg" in fields and "error" not in fields


def consumed(answer: Answer) -> list[Job]:
    """A consume's jobs: one object, or (count > 1) a list; Go lmstfy answers one object to a
    multi-queue consume whatever the count."""
    if no_job(answer):
        return []
    found = success(answer)
    return [job_of(one) for one in found] if isinstance(found, list) else [job_of(found)]


def job_or_none(absent: Collection[str]) -> Callable[[Answer], Job | None]:
    """A peek's job, or None when the 404 says there is none (any other 404, e.g. no such pool, raises)."""

    def read(answer: Answer) -> Job | None:
        if answer.status == 404 and answer.message() in absent:
            return None
        return job_of(success(answer))

    return read


def published(answer: Answer) -> str:
    """The job's id: 201 published, or 200 duplicate (a job with that business id is alive, maybe this one)."""
    return str(success(answer)["job_id"])


def published_many(answer: Answer) -> list[str]:
    return [str(job_id) for job_id in success(answer)["job_ids"]]


def field_of(name: str) -> Callable[[Answer], int]:
    def read(answer: Answer) -> int:
        return int(success(answer)[name])

    return read
