"""Everything a request carries, parsed in one place: names, tokens, numbers, bodies, attributes,
the W3C trace context (a bulk body's array is read in bulk_jobs.py, an admin form in
web/admin/request.py).

Each parser raises `InvalidParameter` (or `BodyTooLarge`) with lmstfy's exact text, so
every route answers the same malformed input the same way. Numbers follow Go's
`strconv.ParseUint`: decimal digits only (no sign, space, underscore or fraction), which
Python's `int()` would partly accept, hence the regex.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from starlette.datastructures import Headers, QueryParams
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from lmstfy_py import ids
from lmstfy_py.config import DEFAULT_POOL, MAX_CONSUME_TIMEOUT, NAME_RE, UINT16_MAX, UINT32_MAX, Defaults
from lmstfy_py.errors import BodyTooLarge, InvalidParameter
from lmstfy_py.types import Backoff, NewJob, TraceContext

MAX_BODY = 1 << 20  # bytes of any request body (lmstfy: of one job)
MAX_PRIORITY = 255
MAX_REASON_BYTES = 1024
MAX_DEAD_PAGE = 100
MAX_KEEP_S = 2_592_000  # 30 days: how long an ended job's record may be kept (SPEC 13)
MAX_EVENTS = 1_000_000
MAX_RESULT_WAIT_S = 600
BACKOFF_POLICIES = ("fixed", "exponential")
DEFAULT_BACKOFF = Backoff()
MAX_NAME_BYTES = 255
MAX_CONSUME_COUNT = 100
MAX_BULK_JOBS = 64
MAX_ATTRIBUTES = 16
MAX_ATTRIBUTE_KEY = 32
MAX_ATTRIBUTE_VALUE = 128
INT64_MAX = 2**63 - 1
ATTRIBUTE_PREFIX = b"job-attr-"
MAX_TRACESTATE = 512

# 20 digits hold any uint64 and keep int() away from Python's 4300-digit limit.
_DIGITS = re.compile(r"[0-9]{1,20}")


# -- numbers -------------------------------------------------------------------


def _first(query: QueryParams, name: str) -> str | None:
    # Go's Query() returns the first of repeated values; Starlette's get() the last.
    values = query.getlist(name)
    return values[0] if values else None


def uint(query: QueryParams, name: str, default: int, maximum: int, minimum: int = 0) -> int:
    """A non-negative decimal integer in [minimum, maximum], else 400 "invalid <name>"."""
    text = _first(query, name)
    if text is None:
        return default
    if not _DIGITS.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise InvalidParameter(f"invalid {name}")
    return int(text)


def seconds(query: QueryParams, name: str, default: int) -> int:
    return uint(query, name, default, UINT32_MAX)


def limit(query: QueryParams) -> int:
    return uint(query, "limit", 1, INT64_MAX, minimum=1)


def choice(query: QueryParams, name: str, allowed: Collection[str], default: str | None = None) -> str:
    """One of the `allowed` words (`default` when absent, if given), else 400 "invalid <name>"."""
    text = _first(query, name)
    if text is None and default is not None:
        return default
    if text is None or text not in allowed:
        raise InvalidParameter(f"invalid {name}")
    return text


def milliseconds(query: QueryParams, name: str, default_s: int) -> int:
    """lmstfy's `<name>` in seconds, or ours, `<name>_ms`, in milliseconds (not both), as ms."""
    if _first(query, f"{name}_ms") is None:
        return seconds(query, name, default_s) * 1000
    if _first(query, name) is not None:
        raise InvalidParameter(f"give {name} or {name}_ms, not both")
    return uint(query, f"{name}_ms", 0, UINT32_MAX)


def optional_milliseconds(query: QueryParams, name: str) -> int | None:
    """As `milliseconds`, None when neither `<name>` nor `<name>_ms` is given."""
    if _first(query, name) is None and _first(query, f"{name}_ms") is None:
        return None
    return milliseconds(query, name, 0)


@dataclass(frozen=True, slots=True)
class PublishOptions:
    delay_ms: int
    ttl_ms: int  # 0 = forever
    tries: int
    priority: int = 0
    job_ids: tuple[str, ...] = ()  # chosen by the business: one, or one per job of a bulk
    unique_for_ms: int = 0
    backoff: Backoff | None = None
    keep_s: int | None = None  # None: the queue's keep setting
    group: str | None = None  # SPEC 14: delivered in order, group_concurrency at a time

    def job(
        self,
        body: bytes,
        attributes: dict[str, str] | None,
        job_id: str | None = None,
        trace: TraceContext | None = None,
    ) -> NewJob:
        return NewJob(
            body,
            ttl_ms=self.ttl_ms,
            delay_ms=self.delay_ms,
            tries=self.tries,
            attributes=attributes,
            priority=self.priority,
            job_id=job_id,
            unique_for_ms=self.unique_for_ms,
            backoff=self.backoff,
            keep_s=self.keep_s,
            group=self.group,
            trace=trace,
        )


def publish_options(query: QueryParams, defaults: Defaults) -> PublishOptions:
    delay_ms = milliseconds(query, "delay", defaults.delay)
    ttl_ms = seconds(query, "ttl", defaults.ttl) * 1000
    if 0 < ttl_ms < delay_ms:  # ttl 0 never expires, so it outlives any delay
        raise InvalidParameter("ttl is shorter than delay")
    tries = uint(query, "tries", defaults.tries, UINT16_MAX)
    if tries == 0:
        raise InvalidParameter("tries shouldn't be zero")
    job_ids = business_ids(query)
    unique_for_ms = seconds(query, "unique_for", 0) * 1000
    priority = uint(query, "priority", 0, MAX_PRIORITY)
    chosen_backoff = backoff(query)
    keep_s = keep(query)
    chosen_group = group(query)
    # Our own rules between values come after every value's form (lmstfy's ttl/delay one stays where lmstfy has it).
    if unique_for_ms and not job_ids:
        raise InvalidParameter("unique_for needs a job_id: an id made by the server is never reused")
    return PublishOptions(
        delay_ms, ttl_ms, tries, priority, job_ids, unique_for_ms, chosen_backoff, keep_s, chosen_group
    )


def keep(query: QueryParams) -> int | None:
    """`keep=S`: seconds the job's record outlives its end; None when not given (the queue's setting)."""
    found = uint(query, "keep", -1, MAX_KEEP_S)  # -1: absent (one look-up on publish's hot path)
    return None if found < 0 else found


def group(query: QueryParams) -> str | None:
    """`group=KEY` (SPEC 14): the job's group, named as a business id is (1..128 of [-_.:A-Za-z0-9])."""
    text = _first(query, "group")
    if text is not None and not ids.is_acceptable(text):
        raise InvalidParameter("invalid group")
    return text


def business_ids(query: QueryParams) -> tuple[str, ...]:
    """`job_id`: the id the business chose for its job (a comma-separated list for a bulk)."""
    text = _first(query, "job_id")
    if text is None:
        return ()
    chosen = tuple(text.split(","))
    if not all(ids.is_acceptable(job_id) for job_id in chosen):
        raise InvalidParameter("invalid job_id: 1 to 128 characters of A-Z a-z 0-9 - _ . :")
    return chosen


def backoff(query: QueryParams) -> Backoff | None:
    """`backoff=fixed|exponential` with `backoff_ms` (base) and `backoff_max_ms`; None for fixed.

    Each value's form is checked before the rules between them: `backoff_max_ms=abc` alone is
    "invalid backoff_max_ms", not "needs backoff=exponential".
    """
    policy = choice(query, "backoff", BACKOFF_POLICIES, default="fixed")
    base = uint(query, "backoff_ms", DEFAULT_BACKOFF.base_ms, UINT32_MAX, minimum=1)
    most = uint(query, "backoff_max_ms", DEFAULT_BACKOFF.max_ms, UINT32_MAX, minimum=1)
    if policy == "fixed":
        given = [name for name in ("backoff_ms", "backoff_max_ms") if _first(query, name) is not None]
        if given:
            raise InvalidParameter(f"{given[0]} needs backoff=exponential")
        return None
    if most < base:
        raise InvalidParameter("backoff_max_ms is smaller than backoff_ms")
    return Backoff(base, most)


def reason(query: QueryParams) -> str:
    """Why a worker released or buried a job: kept as its last_error."""
    text = _first(query, "reason") or ""
    if len(text.encode()) > MAX_REASON_BYTES:
        raise InvalidParameter(f"reason is longer than {MAX_REASON_BYTES} bytes")
    return text


@dataclass(frozen=True, slots=True)
class ConsumeOptions:
    ttr_ms: int
    timeout_ms: int  # already clamped to MAX_CONSUME_TIMEOUT
    count: int


def consume_options(query: QueryParams, defaults: Defaults) -> ConsumeOptions:
    ttr_ms = milliseconds(query, "ttr", defaults.ttr)
    # lmstfy accepts any uint32 timeout; a longer wait than this only ties up a connection.
    timeout = min(seconds(query, "timeout", defaults.timeout), MAX_CONSUME_TIMEOUT)
    count = uint(query, "count", 1, MAX_CONSUME_COUNT, minimum=1)
    return ConsumeOptions(ttr_ms, timeout * 1000, count)


# -- names and tokens ------------------------------------------------------------


def _too_long(name: str) -> bool:
    return len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES


def _check_queue_chars(queue: str) -> None:
    if queue.startswith("_") or not NAME_RE.fullmatch(queue):
        raise InvalidParameter("queue name contains forbidden characters")


def is_queue_name(queue: str) -> bool:
    """What check_names takes as a queue's name: not too long, its characters, no leading "_"."""
    return not _too_long(queue) and not queue.startswith("_") and NAME_RE.fullmatch(queue) is not None


def check_namespace(ns: str, too_long: str = "namespace or queue name too long") -> None:
    if _too_long(ns):
        raise InvalidParameter(too_long)
    if not NAME_RE.fullmatch(ns):
        raise InvalidParameter("namespace name contains forbidden characters")


def check_names(ns: str, queue: str) -> None:
    if _too_long(ns) or _too_long(queue):
        raise InvalidParameter("namespace or queue name too long")
    check_namespace(ns)
    _check_queue_chars(queue)


def queue_list(ns: str, queues: str) -> list[str]:
    """The queues of "q1,q2,...", empty entries skipped; the caller rejects an empty list."""
    names = [queue for queue in queues.split(",") if queue]
    if _too_long(ns) or any(_too_long(queue) for queue in names):
        raise InvalidParameter("namespace or queue name too long")
    check_namespace(ns)
    for queue in names:
        _check_queue_chars(queue)
    return names


def request_token(request: Request) -> str:
    return request.headers.get("x-token") or _first(request.query_params, "token") or ""


def split_token(raw: str) -> tuple[str, str]:
    """lmstfy's "[pool:]token", split on the first ':'; no prefix means the default pool."""
    pool, sep, token = raw.partition(":")
    return (pool, token) if sep else (DEFAULT_POOL, raw)


# -- bodies and attributes -------------------------------------------------------


def _digits_value(text: str | None) -> int | None:
    return int(text) if text is not None and _DIGITS.fullmatch(text) else None


async def read_body(request: Request) -> bytes:
    """The whole body, refused with 413 as soon as it is known to exceed MAX_BODY."""
    return await read_body_from(request.receive, request.headers.get("content-length"))


async def read_body_from(receive: Receive, content_length: str | None) -> bytes:
    """read_body on the request's ASGI messages, read as Starlette's Request.stream reads them
    but without a Request and its async generator: web/hot.py reads a hot request's body so."""
    declared = _digits_value(content_length)
    if declared is not None and declared > MAX_BODY:
        raise BodyTooLarge("body too large")
    chunks: list[bytes] = []
    size = 0
    # Content-Length may be absent (chunked) or lie: count what actually arrives.
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                raise BodyTooLarge("body too large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()


def attributes(headers: Headers) -> dict[str, str] | None:
    """Job attributes from `Job-Attr-<Key>` headers, or None unless `Enable-Job-Version: YES`.

    An empty dict still matters: it makes the engine issue a versioned job id.
    """
    if headers.get("enable-job-version", "").upper() != "YES":
        return None
    found: dict[str, str] = {}
    for raw_name, raw_value in headers.raw:
        name = raw_name.lower()
        if not name.startswith(ATTRIBUTE_PREFIX) or not raw_value:
            continue
        key = name[len(ATTRIBUTE_PREFIX) :].decode("latin-1")[:MAX_ATTRIBUTE_KEY]
        if key and key not in found:  # the first of repeated headers wins, as in Go
            found[key] = raw_value.decode("utf-8", "replace")[:MAX_ATTRIBUTE_VALUE]
    if len(found) > MAX_ATTRIBUTES:
        raise InvalidParameter("too many attributes")
    return found


# -- trace context -------------------------------------------------------------

# A publish's W3C trace context (SPEC 15): the `traceparent` and `tracestate` headers, checked.
#
# W3C's rule: an invalid traceparent is ignored, never refused, and takes the tracestate with it (a
# tracestate means nothing without its parent). Version 00 must have exactly its shape, lowercase hex,
# ids not all zero. A higher version (01..fe; ff is invalid) may be longer: as W3C says, its first four
# fields are read when they have version 00's shape and the header ends or goes on with "-" after
# them, and the job keeps them as version 00 (the version we speak, as a forwarding W3C participant
# sends). A tracestate is kept as sent when it is at most 512 bytes of printable ASCII (SPEC 15); a
# longer or otherwise malformed one is dropped whole (W3C lets a participant drop what it cannot
# keep; cutting list members off would need parsing them), and the traceparent stays.

_FIELDS = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE, _ZERO_PARENT = "0" * 32, "0" * 16
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_OWS = " \t"


def trace_context(traceparent: str | None, tracestate: str | None) -> TraceContext | None:
    """The context these two values make, or None when the traceparent is absent or invalid."""
    if traceparent is None:
        return None
    parent = _traceparent(traceparent.strip(_OWS))
    return None if parent is None else TraceContext(parent, _tracestate(tracestate))


def trace_from_headers(headers: Headers) -> TraceContext | None:
    """A request's trace context; None (the common case) costs one header look-up."""
    traceparent = headers.get("traceparent")
    if traceparent is None:
        return None
    return trace_context(traceparent, tracestate_of(headers))


def tracestate_of(headers: Headers) -> str | None:
    """The tracestate header: W3C's one list, several headers joined by commas."""
    states = headers.getlist("tracestate")
    return ",".join(states) if states else None


def _traceparent(text: str) -> str | None:
    found = _FIELDS.match(text)
    if found is None:
        return None
    version, trace_id, parent_id, flags = found.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_PARENT:
        return None
    if version == "00":
        return text if len(text) == 55 else None
    if len(text) > 55 and text[55] != "-":
        return None
    return f"00-{trace_id}-{parent_id}-{flags}"


def _tracestate(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip(_OWS)
    if not text or len(text) > MAX_TRACESTATE or _PRINTABLE.fullmatch(text) is None:
        return None
    return text
