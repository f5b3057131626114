"""Every data-plane route of one namespace, as a `Call`: lmstfy's routes and lmstfy-py's (SPEC
sections 2, 7, 9, 13 and 14). Nothing here sends anything; Client and AsyncClient do.

Parameters the caller leaves at None are not sent, so the server's configured defaults apply.
Durations are seconds; a fractional one is sent in milliseconds (`delay_ms`, `ttr_ms`, lmstfy-py
only), a whole one as lmstfy's seconds, so a caller who stays with whole seconds and lmstfy's
parameters speaks to Go lmstfy too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict
from urllib.parse import quote

from lmstfy_py.client import calls
from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.flow import read_stats
from lmstfy_py.client.job import DeadJob, DeadLetter, DeadPage, Job, QueueStats, Released, Schedule, Scheduled
from lmstfy_py.client.outcomes import Outcome, Settings, SettingsArgs, read_outcome, read_settings, setting_params
from lmstfy_py.tracing.propagation import current_headers

ACK_BATCH = 100  # job ids per batch ACK, what one count=100 consume hands out
Backoff = Literal["fixed", "exponential"]
AckIds = Sequence[tuple[str, str]]  # (queue, job id) pairs a consume ACKs first
Catchup = Literal["one", "none"]


class PublishArgs(TypedDict, total=False):
    """The keyword arguments of every publish method (see PublishOptions)."""

    delay: float
    ttl: int
    tries: int
    priority: int
    unique_for: int
    backoff: Backoff
    backoff_ms: int
    backoff_max_ms: int
    attributes: Mapping[str, str]
    keep: int
    group: str
    traceparent: str
    tracestate: str


@dataclass(frozen=True, slots=True)
class PublishOptions:
    """What a publish may say besides the data; None leaves it to the server's default."""

    delay: float = 0
    ttl: int | None = None
    tries: int | None = None
    priority: int | None = None
    unique_for: int | None = None
    backoff: Backoff | None = None
    backoff_ms: int | None = None
    backoff_max_ms: int | None = None
    attributes: Mapping[str, str] | None = None
    keep: int | None = None  # seconds its record outlives its end (lmstfy-py only); None: the queue's
    group: str | None = None  # delivered in order within it, fairly across groups (lmstfy-py only, SPEC 14)
    # W3C trace context kept with the job (SPEC 15); None: the current OpenTelemetry span's, if any.
    traceparent: str | None = None
    tracestate: str | None = None

    def params(self, job_ids: Sequence[str] | None = None) -> dict[str, str]:
        given = {
            "ttl": self.ttl,
            "tries": self.tries,
            "priority": self.priority,
            "unique_for": self.unique_for,
            "backoff": self.backoff,
            "backoff_ms": self.backoff_ms,
            "backoff_max_ms": self.backoff_max_ms,
            "keep": self.keep,
            "group": self.group,
            "job_id": ",".join(job_ids) if job_ids else None,
        }
        return {**duration("delay", self.delay), **{k: str(v) for k, v in given.items() if v is not None}}

    def headers(self) -> dict[str, str]:
        """The trace context (the given one, else the current span's), and lmstfy's attributes: a
        versioned job (Enable-Job-Version) with one Job-Attr-<Key> header each."""
        headers = self.trace_headers()
        if self.attributes:
            headers |= {"Enable-Job-Version": "YES", **{f"Job-Attr-{k}": v for k, v in self.attributes.items()}}
        return headers

    def trace_headers(self) -> dict[str, str]:
        if self.traceparent is None:
            return current_headers()
        given = {"traceparent": self.traceparent}
        return given | {"tracestate": self.tracestate} if self.tracestate else given


class ScheduleArgs(TypedDict, total=False):
    """The keyword arguments of `schedule` (SPEC section 9): `cron` or `every`, and the jobs' options."""

    cron: str
    every: int
    tz: str
    ttl: int
    tries: int
    priority: int
    catchup: Catchup


def duration(name: str, seconds: float | None) -> dict[str, str]:
    """lmstfy's whole seconds when `seconds` is whole (what Go lmstfy understands), else `<name>_ms`."""
    if seconds is None:
        return {}
    if seconds == int(seconds):
        return {name: str(int(seconds))}
    return {f"{name}_ms": str(round(seconds * 1000))}


def _data(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else data


class Routes:
    """The `Call` of every route of namespace `namespace`."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._base = "/api/" + quote(namespace, safe="")

    def path(self, queue: str, *rest: str) -> str:
        return "/".join([self._base, quote(queue, safe=""), *(quote(part, safe="") for part in rest)])

    # -- publish ---------------------------------------------------------------------------------

    def publish(self, queue: str, data: bytes | str, options: PublishOptions, job_id: str | None) -> Call[str]:
        # With a business id a repeat answers "duplicate" and creates nothing: safe to send again.
        params = options.params([job_id] if job_id else None)
        return Call(
            "PUT", self.path(queue), calls.published, params, _data(data), options.headers(), repeatable=bool(job_id)
        )

    def publish_many(
        self, queue: str, items: Sequence[Any], options: PublishOptions, job_ids: Sequence[str] | None
    ) -> Call[list[str]]:
        body = json.dumps(list(items), separators=(",", ":")).encode()
        params, headers = options.params(job_ids), options.headers()
        return Call("PUT", self.path(queue, "bulk"), calls.published_many, params, body, headers, bool(job_ids))

    def republish(
        self, queue: str, old_id: str, data: bytes | str, options: PublishOptions, job_id: str | None
    ) -> Call[str]:
        params = options.params([job_id] if job_id else None)
        path = self.path(queue, "job", old_id)
        return Call("PUT", path, calls.published, params, _data(data), options.headers(), repeatable=bool(job_id))

    # -- consume and a worker's verbs ------------------------------------------------------------

    def consume(
        self, queues: str | Sequence[str], ttr: float | None, timeout: int, count: int, ack: AckIds = ()
    ) -> Call[list[Job]]:
        names = [queues] if isinstance(queues, str) else list(queues)
        path = self._base + "/" + ",".join(quote(name, safe="") for name in names)
        params = {**duration("ttr", ttr), "timeout": str(timeout)}
        if count != 1:
            params["count"] = str(count)
        if ack:  # lmstfy-py only: ACKed before the consume (Go lmstfy ignores it)
            params["ack"] = ",".join(f"{queue}:{job_id}" for queue, job_id in ack)
        # A consume whose answer was lost reserved its jobs: they come back after their ttr, as
        # at-least-once delivery allows, so a repeat loses nothing (nor do its ACKs, done again).
        return Call("GET", path, calls.consumed, params, wait_s=timeout)

    def ack(self, queue: str, job_id: str) -> Call[None]:
        return Call("DELETE", self.path(queue, "job", job_id), calls.nothing)

    def ack_many(self, queue: str, job_ids: Sequence[str]) -> list[Call[None]]:
        """One batch ACK per 100 ids (lmstfy-py's DELETE .../jobs?job_id=...)."""
        batches = [job_ids[i : i + ACK_BATCH] for i in range(0, len(job_ids), ACK_BATCH)]
        path = self.path(queue, "jobs")
        return [Call("DELETE", path, calls.nothing, {"job_id": ",".join(batch)}) for batch in batches]

    def release(
        self, queue: str, job_id: str, delay: float | None, reason: str | None, untried: bool
    ) -> Call[Released]:
        params = {**duration("delay", delay), **({"reason": reason} if reason else {})}
        if untried:
            params["untried"] = "1"
        # Not repeatable: once released, the job may be reserved by another worker, whose
        # reservation a repeat would end.
        return Call("PUT", self.path(queue, "job", job_id, "release"), _released, params, repeatable=False)

    def touch(self, queue: str, job_id: str, ttr: float | None) -> Call[int]:
        return Call("PUT", self.path(queue, "job", job_id, "touch"), calls.field_of("due_ms"), duration("ttr", ttr))

    def bury(self, queue: str, job_id: str, reason: str | None) -> Call[None]:
        params = {"reason": reason} if reason else {}
        return Call("PUT", self.path(queue, "job", job_id, "bury"), calls.nothing, params, repeatable=False)

    # -- outcomes (lmstfy-py only, SPEC 13) ------------------------------------------------------

    def complete(self, queue: str, job_id: str, result: bytes | str) -> Call[None]:
        # A repeat after success answers 409 or 404 (the job ended): not an answer to give the caller.
        path = self.path(queue, "job", job_id, "complete")
        return Call("PUT", path, calls.nothing, body=_data(result), repeatable=False)

    def result(self, queue: str, job_id: str, wait: int) -> Call[Outcome]:
        params = {"wait": str(wait)} if wait else {}
        return Call("GET", self.path(queue, "job", job_id, "result"), read_outcome, params, wait_s=wait)

    def settings(self, queue: str, changes: SettingsArgs) -> Call[Settings]:
        # Setting the same values again changes nothing: safe to repeat.
        params = setting_params(changes)
        return Call("PUT" if params else "GET", self.path(queue, "settings"), read_settings, params)

    def promote(self, queue: str, job_id: str) -> Call[None]:
        # A repeat after success answers 409 (no longer delayed): not an answer to give the caller.
        path = self.path(queue, "job", job_id, "promote")
        return Call("PUT", path, calls.nothing, repeatable=False)

    def events(self, queues: Sequence[str], cursor: str | None) -> Call[None]:
        """The event stream of one queue, or several merged; from `cursor` on (Last-Event-ID, as an
        EventSource resumes). Its answer is read as it streams (client/events.py), not by the Call."""
        headers = {"Last-Event-ID": cursor} if cursor else {}
        if len(queues) == 1:
            return Call("GET", self.path(queues[0], "events"), calls.nothing, headers=headers)
        return Call("GET", self.path("events"), calls.nothing, {"queues": ",".join(queues)}, headers=headers)

    # -- look, count, drop -------------------------------------------------------------------------

    def peek(self, queue: str) -> Call[Job | None]:
        # lmstfy answers "job not found" when the head job's data expired under it.
        return Call("GET", self.path(queue, "peek"), calls.job_or_none({"the queue is empty", "job not found"}))

    def peek_job(self, queue: str, job_id: str) -> Call[Job | None]:
        return Call("GET", self.path(queue, "job", job_id), calls.job_or_none({"job not found"}))

    def size(self, queue: str) -> Call[int]:
        return Call("GET", self.path(queue, "size"), calls.field_of("size"))

    def stats(self, queue: str) -> Call[QueueStats]:
        return Call("GET", self.path(queue, "stats"), read_stats)

    def destroy(self, queue: str) -> Call[None]:
        return Call("DELETE", self.path(queue), calls.nothing)

    def pause(self, queue: str, paused: bool) -> Call[None]:
        return Call("PUT" if paused else "DELETE", self.path(queue, "pause"), calls.nothing)

    # -- dead letter -------------------------------------------------------------------------------

    def dead_letter(self, queue: str) -> Call[DeadLetter]:
        return Call("GET", self.path(queue, "deadletter"), _dead_letter)

    def dead_letter_size(self, queue: str) -> Call[int]:
        return Call("GET", self.path(queue, "deadletter", "size"), calls.field_of("size"))

    def respawn(self, queue: str, limit: int, ttl: int | None) -> Call[int]:
        params = {"limit": str(limit), **({"ttl": str(ttl)} if ttl is not None else {})}
        # A repeat would respawn `limit` more.
        return Call("PUT", self.path(queue, "deadletter"), calls.field_of("count"), params, repeatable=False)

    def delete_dead(self, queue: str, limit: int) -> Call[None]:
        params = {"limit": str(limit)}
        return Call("DELETE", self.path(queue, "deadletter"), calls.nothing, params, repeatable=False)

    def dead_jobs(self, queue: str, limit: int | None, after: str | None) -> Call[DeadPage]:
        params = {k: str(v) for k, v in {"limit": limit, "after": after}.items() if v is not None}
        return Call("GET", self.path(queue, "deadletter", "jobs"), _dead_page, params)

    def respawn_dead_job(
        self, queue: str, job_id: str, ttl: int | None, tries: int | None, delay: float | None
    ) -> Call[None]:
        given = {k: str(v) for k, v in {"ttl": ttl, "tries": tries}.items() if v is not None}
        path = self.path(queue, "deadletter", "job", job_id)
        # A repeat after success answers 404 (no longer dead): not an answer to give the caller.
        return Call("PUT", path, calls.nothing, {**given, **duration("delay", delay)}, repeatable=False)

    def delete_dead_job(self, queue: str, job_id: str) -> Call[None]:
        path = self.path(queue, "deadletter", "job", job_id)
        return Call("DELETE", path, calls.nothing, repeatable=False)

    # -- recurring jobs ------------------------------------------------------------------------------

    def schedule(self, queue: str, name: str, data: bytes | str, options: ScheduleArgs) -> Call[Scheduled]:
        params = {key: str(value) for key, value in options.items() if value is not None}
        # A repeat registers the same schedule again (answered "replaced"): nothing doubles.
        return Call("PUT", self.path(queue, "cron", name), _scheduled, params, _data(data))

    def schedules(self, queue: str) -> Call[list[Schedule]]:
        return Call("GET", self.path(queue, "cron"), _schedules)

    def get_schedule(self, queue: str, name: str) -> Call[Schedule | None]:
        return Call("GET", self.path(queue, "cron", name), _schedule_or_none)

    def delete_schedule(self, queue: str, name: str) -> Call[None]:
        # A repeat after success answers 404 (no such schedule): not an answer to give the caller.
        return Call("DELETE", self.path(queue, "cron", name), calls.nothing, repeatable=False)


def _released(answer: Answer) -> Released:
    fields = calls.success(answer)
    if fields["msg"] == "buried":
        return Released(buried=True)
    return Released(buried=False, due_ms=int(fields["due_ms"]), remain_tries=int(fields["remain_tries"]))


def _dead_letter(answer: Answer) -> DeadLetter:
    fields = calls.success(answer)
    return DeadLetter(int(fields["deadletter_size"]), str(fields["deadletter_head"] or ""))


def _dead_page(answer: Answer) -> DeadPage:
    fields = calls.success(answer)
    jobs = [
        DeadJob(
            str(job["job_id"]),
            calls.base64_data(job.get("data")),
            int(job["attempts"]),
            job.get("last_error"),
            int(job["died_ms"]),
        )
        for job in fields["jobs"]
    ]
    return DeadPage(jobs, fields.get("next"))


def _scheduled(answer: Answer) -> Scheduled:
    return Scheduled(answer.status == 201, int(calls.success(answer)["next_ms"]))


def _schedule_of(fields: dict[str, Any]) -> Schedule:
    return Schedule(
        str(fields["name"]),
        fields["cron"],
        fields["every"],
        str(fields["tz"]),
        int(fields["ttl"]),
        int(fields["tries"]),
        int(fields["priority"]),
        str(fields["catchup"]),
        int(fields["next_ms"]),
        fields["last_ms"],
        fields["last_job_id"],
    )


def _schedules(answer: Answer) -> list[Schedule]:
    return [_schedule_of(fields) for fields in calls.success(answer)["schedules"]]


def _schedule_or_none(answer: Answer) -> Schedule | None:
    """None for "schedule not found"; any other 404 (no such pool) raises."""
    if answer.status == 404 and answer.message() == "schedule not found":
        return None
    return _schedule_of(calls.success(answer))
