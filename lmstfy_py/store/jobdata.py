"""What the engine writes for a new job: its id, lmstfy's ULID (spelled as ids.py reads it), and
its data as the scripts store it (field d of its hash): msgpack of [body, attributes], and for a
job published with a W3C trace context (SPEC 15) [body, attributes, traceparent, tracestate]; and
the copy of a sampled trace kept in field w (lua/_lib.lua) for the steps that do not read the data.

The trace rides in the data rather than in a field of its own so that every delivery (consume,
the pump's hand-over, peek, job state, pushers) carries it with no script reading one more field;
a job without one is stored byte for byte as before, and data stored before reads the same.
"""

from __future__ import annotations

import os
import time
from collections import deque

import msgpack

from lmstfy_py.ids import PAIRS
from lmstfy_py.types import TraceContext

# -- the id -------------------------------------------------------------------

VERSION_WITH_ATTRIBUTES = 1
# Job ids' 48 random bits: the OS's generator, read for _BITS_READ ids at a time (a read per job
# was a syscall per publish). An id need not be secret (every route that takes one also needs the
# token), but it must not be guessable: a client allowed to publish on a queue could otherwise
# publish first with the ids another client's next jobs will get, and those publishes would make
# nothing (200 "duplicate"). Emptied in a forked worker, which must not repeat its parent's bits;
# `popleft` and `extend` are atomic, so threads never share one.
_BITS_READ = 1024
_job_bits: deque[int] = deque()
os.register_at_fork(after_in_child=_job_bits.clear)


def new_job_id(delay_seconds: int, version: int = 0, now_ms: int | None = None) -> str:
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    delay = int.from_bytes(delay_seconds.to_bytes(4, "little"), "big")
    ulid = _encode((now_ms & (2**48 - 1)) << 80 | _job_id_bits() << 32 | delay)
    return f"{version}{ulid}" if version else ulid


def _encode(value: int) -> str:
    # Every publish makes an id: 13 table lookups cost a third of base64's base32 (a Python loop
    # over 5-byte groups in 3.11) and a tenth of 26 turns of a digit loop.
    p = PAIRS
    return (
        p[value >> 120 & 1023] + p[value >> 110 & 1023] + p[value >> 100 & 1023] + p[value >> 90 & 1023]
        + p[value >> 80 & 1023] + p[value >> 70 & 1023] + p[value >> 60 & 1023] + p[value >> 50 & 1023]
        + p[value >> 40 & 1023] + p[value >> 30 & 1023] + p[value >> 20 & 1023] + p[value >> 10 & 1023]
        + p[value & 1023]
    )  # fmt: skip


def _job_id_bits() -> int:
    try:
        return _job_bits.popleft()
    except IndexError:
        read = os.urandom(6 * _BITS_READ)
        _job_bits.extend(int.from_bytes(read[i : i + 6], "big") for i in range(0, len(read), 6))
        return _job_bits.popleft()


# -- the data -----------------------------------------------------------------

# packb makes a Packer per call, 4x the cost of packing with one kept (1.4 against 0.3 µs a job).
# Sharing it is safe: its pack() holds the GIL throughout and resets its buffer before returning.
_PACKER = msgpack.Packer(use_bin_type=True)


def encode_data(body: bytes, attributes: dict[str, str] | None, trace: TraceContext | None = None) -> bytes:
    fields: list[object] = [body, attributes]
    if trace is not None:
        fields += [trace.traceparent, trace.tracestate]
    packed: bytes = _PACKER.pack(fields)
    return packed


TRACEPARENT_CHARS = 55  # version 00's: the tracestate follows it in field w


def trace_field(trace: TraceContext | None) -> str:
    """Field w of a new job: its traceparent and tracestate, only when the trace is sampled ("": none).
    An unsampled trace exports nothing, so its jobs' hashes are not made larger."""
    if trace is None or not trace.sampled:
        return ""
    return trace.traceparent + (trace.tracestate or "")


def stored_trace(field: bytes) -> TraceContext:
    """The trace context a field w holds."""
    text = field.decode("ascii")
    return TraceContext(text[:TRACEPARENT_CHARS], text[TRACEPARENT_CHARS:] or None)


def decode_data(data: bytes) -> tuple[bytes, dict[str, str] | None, TraceContext | None]:
    fields = msgpack.unpackb(data, raw=False)
    trace = TraceContext(fields[2], fields[3]) if len(fields) > 2 else None
    return fields[0], fields[1], trace
