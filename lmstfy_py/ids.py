"""Job ids, compatible with lmstfy's, and request ids.

A job id is a ULID (48-bit millisecond timestamp + 80 random bits, Crockford
base32, 26 chars) whose last 4 bytes are overwritten with the publish delay in
whole seconds, little-endian, so an id alone tells when a job was published and
how long it was delayed. A job published with attributes carries a one-digit
version prefix ("1"), which makes its id 27 chars long.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import deque

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
# Every ten bits spelled as two digits: a ULID's 130 bits (the top 2 zero) are 13 lookups.
_PAIRS = [_ALPHABET[i >> 5] + _ALPHABET[i & 31] for i in range(1024)]
_PAIR_VALUES = {pair: i for i, pair in enumerate(_PAIRS)}
ULID_LEN = 26
# Request ids' random bits: a fast generator of our own, so that an application embedding the
# server and seeding `random` for itself cannot make every replica repeat the same ids; seeded
# afresh in every forked worker, as `random`'s own is. Every answer shows 128 of its bits, and a
# few hundred answers give its state away: job ids do not use it (_job_id_bits).
_random = random.Random()
os.register_at_fork(after_in_child=_random.seed)
random_bits = _random.getrandbits
# Job ids' 48 random bits: the OS's generator, read for _BITS_READ ids at a time (a read per job
# was a syscall per publish). An id need not be secret (every route that takes one also needs the
# token), but it must not be guessable: a client allowed to publish on a queue could otherwise
# publish first with the ids another client's next jobs will get, and those publishes would make
# nothing (200 "duplicate"). Emptied in a forked worker, which must not repeat its parent's bits;
# `popleft` and `extend` are atomic, so threads never share one.
_BITS_READ = 1024
_job_bits: deque[int] = deque()
os.register_at_fork(after_in_child=_job_bits.clear)
VERSION_WITH_ATTRIBUTES = 1
_ID_RE = re.compile(r"[0-9]?[0-7][0-9A-HJKMNP-TV-Z]{25}")


def _encode(value: int) -> str:
    # Every publish makes an id: 13 table lookups cost a third of base64's base32 (a Python loop
    # over 5-byte groups in 3.11) and a tenth of 26 turns of a digit loop.
    p = _PAIRS
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


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = (value << 5) | _DECODE[char]
    return value


def new_job_id(delay_seconds: int, version: int = 0, now_ms: int | None = None) -> str:
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    delay = int.from_bytes(delay_seconds.to_bytes(4, "little"), "big")
    ulid = _encode((now_ms & (2**48 - 1)) << 80 | _job_id_bits() << 32 | delay)
    return f"{version}{ulid}" if version else ulid


# A job id the business chooses (Youzan: "the job id is decided by the business"); every id we
# make matches it too.
_BUSINESS_ID_RE = re.compile(r"[-_.:A-Za-z0-9]{1,128}")


def is_valid(job_id: str) -> bool:
    """Whether `job_id` is one of ours (a ULID, perhaps versioned): it tells when it was made."""
    return bool(_ID_RE.fullmatch(job_id))


def is_acceptable(job_id: str) -> bool:
    """Whether `job_id` may name a job: ours, or one a business chose (1..128 of [-_.:A-Za-z0-9])."""
    return bool(_BUSINESS_ID_RE.fullmatch(job_id))


def strip_version(job_id: str) -> tuple[str, int]:
    if len(job_id) > ULID_LEN:
        return job_id[1:], int(job_id[0])
    return job_id, 0


def _raw(job_id: str) -> bytes:
    return _decode(strip_version(job_id)[0]).to_bytes(16, "big")


def timestamp_ms(job_id: str) -> int:
    """When an id of ours (is_valid) was made: its first ten digits, read two at a time (every
    consumed and every ACKed job asks; a digit loop over the whole id took 3x as long)."""
    ulid, v = strip_version(job_id)[0], _PAIR_VALUES
    return v[ulid[0:2]] << 40 | v[ulid[2:4]] << 30 | v[ulid[4:6]] << 20 | v[ulid[6:8]] << 10 | v[ulid[8:10]]


def delay_seconds(job_id: str) -> int:
    return int.from_bytes(_raw(job_id)[12:], "little")


def elapsed_ms(job_id: str, now_ms: int | None = None) -> int:
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    return max(0, now_ms - timestamp_ms(job_id))


# A caller's X-Request-ID is echoed back only if it cannot garble a log line or a header.
_SANE_REQUEST_ID = re.compile(r"[-A-Za-z0-9_.:+/=]{1,128}")


def request_id(incoming: str | None) -> str:
    """A request's id: the caller's, if sane, else 128 random bits in hex, like a uuid4 without its
    read of os.urandom per request (random_bits is seeded afresh in every forked worker)."""
    if incoming is not None and _SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return f"{random_bits(128):032x}"
