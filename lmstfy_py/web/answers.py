"""The JSON of successful answers, shaped in one place for both ports (errors are errors.py's)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response

from lmstfy_py.push import shown
from lmstfy_py.types import DeadPage, Job, JobInfo, Published, QueueSettings, QueueStats, Released, TraceContext

JSON = "application/json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def job_json(job: Job, consumed: bool) -> dict[str, Any]:
    """lmstfy's job object; `consumed` adds its "msg"."""
    trace = job.trace
    shown = {
        "namespace": job.namespace,
        "queue": job.queue,
        "job_id": job.job_id,
        "data": _b64(job.body),
        "ttl": job.ttl,
        "elapsed_ms": job.elapsed_ms,
        "remain_tries": job.remain_tries,
        # lmstfy answers null for a versioned job published without any attribute.
        "attributes": job.attributes or None,
        "traceparent": None if trace is None else trace.traceparent,  # trace_json's, in line: per job
        "tracestate": None if trace is None else trace.tracestate,
    }
    return {"msg": "new job", **shown} if consumed else shown


def trace_json(trace: TraceContext | None) -> dict[str, str | None]:
    """Beyond lmstfy (SPEC 15): the W3C trace context the job was published with, each null when none."""
    if trace is None:
        return {"traceparent": None, "tracestate": None}
    return {"traceparent": trace.traceparent, "tracestate": trace.tracestate}


def job_info_json(info: JobInfo) -> dict[str, Any]:
    """lmstfy's job object and, beyond lmstfy, where the job is in its life: SPEC 7's fields, SPEC
    13's when it ended and a complete's result (an ended job's record; null while the job lives), and
    SPEC 14's group (null without)."""
    return {
        **job_json(info.job, consumed=False),
        "state": info.state,
        "due_ms": info.due_ms,
        "attempts": info.job.attempts,
        "priority": info.priority,
        "last_error": shown.optional_reason(info.last_error),
        "result": None if info.result is None else _b64(info.result),
        "finished_ms": info.finished_ms,
        "group": info.group,
    }


def settings_json(ns: str, queue: str, settings: QueueSettings) -> dict[str, Any]:
    return {
        "namespace": ns,
        "queue": queue,
        "keep": settings.keep_s,
        "events": settings.events,
        "max_reserved": settings.max_reserved,
        "rate": _number(settings.rate),
        "burst": settings.burst,
        "group_concurrency": settings.group_concurrency,
    }


def _number(value: float) -> int | float:
    # A rate of 10 reads as it was given, 10, not 10.0.
    return int(value) if value.is_integer() else value


def published(result: Published) -> Response:
    status, body = published_body(result)
    return Response(body, status, media_type=JSON)


def published_body(result: Published) -> tuple[int, bytes]:
    # A job id (ours, or one a business chose: ids.is_acceptable) needs no JSON escaping: the body is
    # put together without json.dumps, the same compact bytes JSONResponse would give.
    if not result.created:
        return 200, b'{"msg":"duplicate","job_id":"' + result.job_id.encode() + b'"}'
    return 201, b'{"msg":"published","job_id":"' + result.job_id.encode() + b'"}'


def consumed_body(jobs: Sequence[Job], count: int) -> bytes:
    """A consume's answer: lmstfy's job object, or a list of them when more than one was asked for.
    Encoded by orjson, 14 times faster than json_bytes on 100 jobs, to the same bytes: a job object
    holds strings, whole numbers within 64 bits, null and a dict of strings, which both write alike
    (tests/web/test_answers.py); json_bytes stays for answers with fractions, which they do not."""
    if count == 1:
        return orjson.dumps(job_json(jobs[0], consumed=True))
    return orjson.dumps([job_json(job, consumed=True) for job in jobs])


# JSONResponse.render's settings; json.dumps would make an encoder per call for them.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def json_bytes(content: Any) -> bytes:
    # JSONResponse.render's bytes, for the answers web/hot.py gives without a Response.
    return _ENCODER.encode(content).encode()


def published_many(results: Sequence[Published], ids_given: bool) -> Response:
    """lmstfy's answer; with business ids, also those that were duplicates (nothing made for them)."""
    shown: dict[str, Any] = {"msg": "published", "job_ids": [r.job_id for r in results]}
    if not ids_given:
        return JSONResponse(shown, status_code=201)
    shown["duplicates"] = [r.job_id for r in results if not r.created]
    if len(shown["duplicates"]) == len(results):
        return JSONResponse({**shown, "msg": "duplicate"})
    return JSONResponse(shown, status_code=201)


def released(result: Released) -> Response:
    if result.buried:
        return JSONResponse({"msg": "buried"})
    return JSONResponse({"msg": "released", "due_ms": result.due_ms, "remain_tries": result.remain_tries})


# GET .../stats shows these fields of QueueStats under their own names, in this order (SPEC 14).
STATS_FIELDS = ("ready", "delayed", "reserved", "dead", "paused", "oldest_ready_ms")


def stats_json(ns: str, queue: str, stats: QueueStats) -> dict[str, Any]:
    due = stats.due
    shown = {name: getattr(stats, name) for name in STATS_FIELDS}
    return {
        "namespace": ns,
        "queue": queue,
        **shown,
        "due": {"1m": due.within_1m, "1h": due.within_1h, "1d": due.within_1d, "later": due.later},
    }


def dead_page_json(page: DeadPage) -> dict[str, Any]:
    jobs = [
        {
            "job_id": job.job_id,
            "data": _b64(job.body),
            "attempts": job.attempts,
            "last_error": shown.optional_reason(job.last_error),  # one stored with credentials, too
            "died_ms": job.died_ms,
            **trace_json(job.trace),
        }
        for job in page.jobs
    ]
    return {"jobs": jobs, "next": page.next}


def message(msg: str) -> Response:
    return JSONResponse({"msg": msg})


def no_content() -> Response:
    return Response(status_code=204)
