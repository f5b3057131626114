"""Job ids, compatible with lmstfy's, read and checked (store/jobdata.py makes them).

A job id is a ULID (48-bit millisecond timestamp + 80 random bits, Crockford
base32, 26 chars) whose last 4 bytes are overwritten with the publish delay in
whole seconds, little-endian, so an id alone tells when a job was published and
how long it was delayed. A job published with attributes carries a one-digit
version prefix ("1"), which makes its id 27 chars long.
"""

from __future__ import annotations

import re
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
# Every ten bits spelled as two digits: a ULID's 130 bits (the top 2 zero) are 13 lookups.
PAIRS = [_ALPHABET[i >> 5] + _ALPHABET[i & 31] for i in range(1024)]
_PAIR_VALUES = {pair: i for i, pair in enumerate(PAIRS)}
ULID_LEN = 26
_ID_RE = re.compile(r"[0-9]?[0-7][0-9A-HJKMNP-TV-Z]{25}")


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = (value << 5) | _DECODE[char]
    return value


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
