"""What token-cli prints for people: aligned tables and short lines (--json prints the answer as is)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import urllib.parse
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PREVIEW_CHARS = 60
LIMIT_KEYS = ("read", "write", "interval")
DEFAULT_POOL = "default"


def path(*segments: str) -> str:
    return "/" + "/".join(urllib.parse.quote(segment, safe="") for segment in segments)


def pooled(token: str, pool: str | None) -> str:
    """lmstfy's "pool:token" form: how a token of another pool is named in a path."""
    return f"{pool}:{token}" if pool and pool != DEFAULT_POOL and ":" not in token else token


# -- rendering -------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], empty: str) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    body = [list(row) for row in rows]
    if not body:
        return empty
    cells = [list(headers), *([str(cell) for cell in row] for row in body)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], int) for row in body) for i in range(len(headers))]
    lines = [
        "  ".join(cell.rjust(w) if num else cell.ljust(w) for cell, w, num in zip(row, widths, numeric, strict=True))
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def counted(number: object, noun: str) -> str:
    """A count and its noun, "1 job" or "2 jobs": an "s" makes the plural of every noun token-cli counts."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def fields(values: Mapping[str, object]) -> str:
    width = max((len(key) for key in values), default=0)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in values.items())


def preview(data_b64: str) -> str:
    """A job's data for a terminal: the text itself (escaped, cut short) when it is UTF-8."""
    try:
        raw = base64.b64decode(data_b64, validate=True)
    except binascii.Error:
        return "<not base64>"
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return f"<{counted(len(raw), 'byte')}, binary>"
    shown = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return shown if len(shown) <= PREVIEW_CHARS else shown[: PREVIEW_CHARS - 3] + "..."


def duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    for unit, size, sub_unit, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            return f"{seconds // size}{unit}{(seconds % size) // sub_size}{sub_unit}"
    return f"{ms / 1000:.1f}s"


def attributes(attrs: Mapping[str, str] | None) -> str:
    return ",".join(f"{key}={value}" for key, value in attrs.items()) if attrs else "-"


def count(value: object) -> object:
    """A count the server may send as a number or as the collection itself."""
    return len(value) if isinstance(value, list | dict) else value


def render_info(answer: Mapping[str, list[str]]) -> str:
    rows = [[ns, ", ".join(queues)] for ns, queues in sorted(answer.items())]
    return table(["NAMESPACE", "QUEUES"], rows, empty="no namespaces")


def render_namespaces(answer: Mapping[str, Any]) -> str:
    rows: list[list[object]] = []
    for ns in answer.get("namespaces", []):
        first = [ns["namespace"], count(ns.get("tokens", 0)), ns.get("timer_size", 0)]
        queues = ns.get("queues") or [{"queue": "-", "size": "", "deadletter_size": ""}]
        for i, queue in enumerate(queues):
            lead = first if i == 0 else ["", "", ""]
            rows.append([*lead, queue["queue"], queue["size"], queue["deadletter_size"]])
    headers = ["NAMESPACE", "TOKENS", "TIMER", "QUEUE", "READY", "DEADLETTER"]
    return table(headers, rows, empty=f"no namespaces in pool {answer.get('pool', DEFAULT_POOL)}")


def render_namespace_deleted(answer: Mapping[str, Any]) -> str:
    tokens, limits = counted(answer["tokens_deleted"], "token"), counted(answer["limits_deleted"], "limit")
    counts = f"{tokens}, {limits}, {counted(answer['jobs_deleted'], 'job')}"
    return f"deleted namespace {answer['namespace']}: {counts}"


def render_tokens(answer: Mapping[str, Mapping[str, Any]]) -> str:
    """The tokens and descriptions; with their scopes and queue patterns (SPEC 15) when one of them has
    any ("all" for none), before the description, whose spaces would make them hard to pick out."""
    tokens, scopes = answer["tokens"], answer.get("scopes") or {}
    if not any(scopes.get(token, {}).get(name) is not None for token in tokens for name in ("scope", "queues")):
        return table(["TOKEN", "DESCRIPTION"], sorted(tokens.items()), empty="no tokens")
    rows = [[token, *_granted(scopes.get(token, {})), description] for token, description in sorted(tokens.items())]
    return table(["TOKEN", "SCOPE", "QUEUES", "DESCRIPTION"], rows, empty="no tokens")


def _granted(grant: Mapping[str, Sequence[str] | None]) -> list[str]:
    return [",".join(grant.get(name) or ()) if grant.get(name) is not None else "all" for name in ("scope", "queues")]


def render_limits(answer: Sequence[Mapping[str, Any]]) -> str:
    ordered = sorted(answer, key=lambda item: (item["namespace"], item["token"]))
    rows = [[item["namespace"], item["token"], *(item["limiter"][key] for key in LIMIT_KEYS)] for item in ordered]
    return table(["NAMESPACE", "TOKEN", "READ", "WRITE", "INTERVAL"], rows, empty="no limits")


def render_deadletter(answer: Mapping[str, Any]) -> str:
    head = f"{answer['namespace']}/{answer['queue']}: {counted(answer['deadletter_size'], 'dead job')}"
    if answer.get("deadletter_head"):
        head += f", oldest {answer['deadletter_head']}"
    rows = [_dead_job_row(job) for job in answer.get("jobs", [])]
    return head + "\n" + table(["JOB_ID", "TTL", "AGE", "ATTRIBUTES", "DATA"], rows, empty="") if rows else head


def _dead_job_row(job: Mapping[str, Any]) -> list[object]:
    ttl = job["ttl"] or "forever"  # lmstfy's ttl 0: the job never expires
    return [job["job_id"], ttl, duration(job["elapsed_ms"]), attributes(job.get("attributes")), preview(job["data"])]


def render_limit(limiter: Mapping[str, Any]) -> str:
    return f"read {limiter['read']}, write {limiter['write']} per {limiter['interval']}s"


def render_dead_page(answer: Mapping[str, Any]) -> str:
    rows = [
        [job["job_id"], job["attempts"], moment(job["died_ms"]), job["last_error"] or "", preview(job["data"])]
        for job in answer["jobs"]
    ]
    text = table(["JOB_ID", "ATTEMPTS", "DIED", "LAST_ERROR", "DATA"], rows, empty="no dead jobs")
    return text + (f"\nmore: --after {answer['next']}" if answer.get("next") else "")


def moment(ms: int | None) -> str:
    """A time (ms) as this machine's local date and time with its offset ("2024-05-02T09:00:00+02:00"),
    so that it is not read as another zone's; "-" for none."""
    return "-" if ms is None else dt.datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def zoned(ms: int | None, tz: str) -> str:
    """A time (ms) in the zone `tz`, offset included ("2024-05-02T09:00:00+09:00"); "-" for none.

    A schedule's times in its own zone read like its cron, and the offset keeps them from being
    read as the machine's local time. A zone this machine does not know: UTC, said so all the same.
    """
    if ms is None:
        return "-"
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(tz)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        zone = dt.UTC
    return dt.datetime.fromtimestamp(ms / 1000, zone).isoformat(timespec="seconds")


def render_pushers(answer: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]) -> str:
    rows = [
        [pool, ns, group]
        for pool, namespaces in sorted(answer["pushers"].items())
        for ns, groups in sorted(namespaces.items())
        for group in groups
    ]
    return table(["POOL", "NAMESPACE", "GROUP"], rows, empty="no push groups")


def render_pushers_of(answer: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    rows = [
        [group, ",".join(p["queues"]), p["endpoint"], p["workers"], p["timeout"], _push_extras(p)]
        for group, p in sorted(answer["pushers"].items())
    ]
    return table(["GROUP", "QUEUES", "ENDPOINT", "WORKERS", "TIMEOUT", "MORE"], rows, empty="no push groups")


def render_pusher(answer: Mapping[str, Mapping[str, Any]]) -> str:
    pusher = answer["pusher"]
    shown = {"queues": ", ".join(pusher["queues"]), **{k: v for k, v in pusher.items() if k != "queues"}}
    return fields(shown)


def _push_extras(pusher: Mapping[str, Any]) -> str:
    extras = []
    if pusher.get("backoff") == "exponential":
        extras.append(f"backoff={duration(pusher['backoff_ms'])}..{duration(pusher['backoff_max_ms'])}")
    if pusher.get("max_attempts"):
        extras.append(f"max_attempts={pusher['max_attempts']}")
    if pusher.get("signed"):
        extras.append("signed")
    return ",".join(extras) or "-"


def render_schedules(answer: Mapping[str, Sequence[Mapping[str, Any]]], queue: str | None) -> str:
    rows = [
        [
            s["queue"],
            s["name"],
            s["cron"] if s["cron"] is not None else f"every {s['every']}s",
            s["tz"],
            zoned(s["next_ms"], s["tz"]),
            zoned(s["last_ms"], s["tz"]),
            s["last_job_id"] or "-",
        ]
        for s in answer["schedules"]
        if queue is None or s["queue"] == queue
    ]
    return table(["QUEUE", "NAME", "WHEN", "TZ", "NEXT", "LAST", "LAST_JOB"], rows, empty="no schedules")
