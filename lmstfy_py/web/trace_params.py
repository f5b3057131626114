"""A publish's W3C trace context (SPEC 15): the `traceparent` and `tracestate` headers, checked.

W3C's rule: an invalid traceparent is ignored, never refused, and takes the tracestate with it (a
tracestate means nothing without its parent). Version 00 must have exactly its shape, lowercase hex,
ids not all zero. A higher version (01..fe; ff is invalid) may be longer: as W3C says, its first four
fields are read when they have version 00's shape and the header ends or goes on with "-" after
them, and the job keeps them as version 00 (the version we speak, as a forwarding W3C participant
sends). A tracestate is kept as sent when it is at most 512 bytes of printable ASCII (SPEC 15); a
longer or otherwise malformed one is dropped whole (W3C lets a participant drop what it cannot
keep; cutting list members off would need parsing them), and the traceparent stays.
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers

from lmstfy_py.types import TraceContext

MAX_TRACESTATE = 512
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


def from_headers(headers: Headers) -> TraceContext | None:
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
