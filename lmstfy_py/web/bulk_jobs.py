"""A bulk publish's jobs (PUT .../bulk): lmstfy's array of data, or beyond lmstfy (SPEC 15) the object
form `{"jobs":[{"data":V,"traceparent":"...","tracestate":"...","group":"..."}]}`.

The array gives every job the request's options (query) and trace context (headers). In the object
form each job's own fields win over them: a job's "traceparent" and "tracestate" replace the
headers' (the pair is then checked as a publish's headers are: an invalid traceparent is ignored),
its "group" the query's. `data` is kept as the exact JSON text of its value, as an array's element.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn

from starlette.datastructures import Headers

from lmstfy_py import ids
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.types import NewJob, TraceContext
from lmstfy_py.web import params

NOT_AN_ARRAY = "request body should be an array of objects"
BAD_JOB = 'each of "jobs" should be an object with "data"'
_JOB_FIELDS = frozenset(("data", "traceparent", "tracestate", "group"))
JSON_SPACE = " \t\n\r"


def bulk_jobs(raw: bytes, options: params.PublishOptions, headers: Headers) -> list[NewJob]:
    """The bulk's jobs, one per element, named by the query's job_id list when it has one."""
    text = raw.decode("utf-8", "surrogateescape")  # as bulk_bodies: bytes that are not UTF-8 kept
    entries = _object_form(text) if text.lstrip(JSON_SPACE).startswith("{") else None
    count = len(entries) if entries is not None else 0
    bodies = bulk_bodies(raw) if entries is None else []
    count = count or len(bodies)
    if options.job_ids and len(options.job_ids) != count:
        raise InvalidParameter("job_id should name one id per job of the bulk")
    attributes, trace = params.attributes(headers), params.trace_from_headers(headers)
    chosen = options.job_ids or (None,) * count
    if entries is None:
        return [options.job(body, attributes, job_id, trace) for body, job_id in zip(bodies, chosen, strict=True)]
    return [_job(entry, options, attributes, headers, job_id) for entry, job_id in zip(entries, chosen, strict=True)]


def _object_form(text: str) -> list[dict[str, str]]:
    """The members of each of "jobs", as raw JSON texts."""

    def jobs() -> str:
        top = _members(text)
        if set(top) != {"jobs"}:
            raise ValueError("not the object form")
        return top["jobs"]

    return [_entry(element) for element in _elements(jobs)]


def _elements(array: Callable[[], str]) -> list[str]:
    """The elements of the JSON array `array()` answers, one per job: 1 to MAX_BULK_JOBS of them."""
    try:
        elements = split_json_array(array())
    except (ValueError, RecursionError) as exc:
        raise InvalidParameter(NOT_AN_ARRAY) from exc
    if not elements:
        raise InvalidParameter("no jobs")
    if len(elements) > params.MAX_BULK_JOBS:
        raise InvalidParameter("too many jobs")
    return elements


def _entry(element: str) -> dict[str, str]:
    try:
        members = _members(element)
    except ValueError as exc:
        raise InvalidParameter(BAD_JOB) from exc
    if "data" not in members:
        raise InvalidParameter(BAD_JOB)
    unknown = sorted(set(members) - _JOB_FIELDS)
    if unknown:
        raise InvalidParameter(f"unknown field {json.dumps(unknown[0])} in a job")
    return members


def _job(
    entry: dict[str, str],
    options: params.PublishOptions,
    attributes: dict[str, str] | None,
    headers: Headers,
    job_id: str | None,
) -> NewJob:
    job = options.job(entry["data"].encode("utf-8", "surrogateescape"), attributes, job_id, _trace(entry, headers))
    group = _text(entry, "group")
    if group is None:
        return job
    if not ids.is_acceptable(group):
        raise InvalidParameter("invalid group")
    return replace(job, group=group)


def _trace(entry: dict[str, str], headers: Headers) -> TraceContext | None:
    """The job's own fields win; a job's own traceparent never takes the request's tracestate,
    which belongs to another trace (W3C carries the two as a pair)."""
    traceparent, tracestate = _text(entry, "traceparent"), _text(entry, "tracestate")
    if traceparent is not None:
        return params.trace_context(traceparent, tracestate)
    if tracestate is None:
        return params.trace_from_headers(headers)
    return params.trace_context(headers.get("traceparent"), tracestate)


def _text(entry: dict[str, str], name: str) -> str | None:
    """A job's string field; null or absent: None."""
    raw = entry.get(name)
    value: Any = None if raw is None else json.loads(raw)
    if value is not None and not isinstance(value, str):
        raise InvalidParameter(f"{name} should be a string")
    return value


def _members(text: str) -> dict[str, str]:
    """A JSON object's members, each value as its exact text; ValueError unless `text` is one object."""
    members: dict[str, str] = {}

    def member(at: int) -> int:
        name, at = DECODER.raw_decode(text, at)
        at = skip_space(text, at)
        if not isinstance(name, str) or not text.startswith(":", at):
            raise ValueError("expected a name and ':'")
        start = skip_space(text, at + 1)
        _, end = DECODER.raw_decode(text, start)
        members[name] = text[start:end]
        return end

    _walk(text, "{", "}", member)
    return members


def bulk_bodies(raw: bytes) -> list[bytes]:
    """Each element's exact JSON text (as Go's []json.RawMessage keeps it), one per job."""
    # surrogateescape round-trips bytes that are not UTF-8, as Go keeps them inside strings.
    elements = _elements(lambda: raw.decode("utf-8", "surrogateescape"))
    return [element.encode("utf-8", "surrogateescape") for element in elements]


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in JSON_SPACE:
        at += 1
    return at


def split_json_array(text: str) -> list[str]:
    """Each element's exact text; ValueError unless `text` is one array (or null: none)."""
    if text.strip(JSON_SPACE) == "null":  # Go decodes null into an empty slice
        return []
    elements: list[str] = []

    def element(at: int) -> int:
        _, end = DECODER.raw_decode(text, at)
        elements.append(text[at:end])
        return end

    _walk(text, "[", "]", element)
    return elements


def _walk(text: str, opening: str, closing: str, entry: Callable[[int], int]) -> None:
    """Reads `text` as one JSON array or object (by its brackets) and nothing after it: `entry`
    reads each of its entries from where it starts and answers where it ends."""
    at = skip_space(text, 0)
    if not text.startswith(opening, at):
        raise ValueError(f"expected {opening!r}")
    at = skip_space(text, at + 1)
    if not text.startswith(closing, at):
        while True:
            at = skip_space(text, entry(at))
            if text.startswith(closing, at):
                break
            if not text.startswith(",", at):
                raise ValueError(f"expected ',' or {closing!r}")
            at = skip_space(text, at + 1)
    if skip_space(text, at + 1) != len(text):
        raise ValueError("data after the JSON value")
