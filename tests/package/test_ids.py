"""Job ids: lmstfy's ULIDs, spelled the same by every version of the encoder (ids.py)."""

from __future__ import annotations

import time

import pytest

from lmstfy_py import ids


@pytest.mark.parametrize(
    ("raw", "spelled"),
    [
        (bytes(range(16)), "00041061050R3GG28A1C60T3GF"),  # what the earlier, digit-by-digit encoder wrote
        (bytes(16), "00000000000000000000000000"),
        (b"\xff" * 16, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
    ],
)
def test_sixteen_bytes_are_spelled_in_crockfords_base32(raw: bytes, spelled: str) -> None:
    assert ids._encode(int.from_bytes(raw, "big")) == spelled
    assert ids._raw(spelled) == raw


def test_a_new_id_carries_its_time_and_delay() -> None:
    now_ms = time.time_ns() // 1_000_000
    job_id = ids.new_job_id(delay_seconds=3600, now_ms=now_ms)
    assert ids.is_valid(job_id) and len(job_id) == ids.ULID_LEN
    assert (ids.timestamp_ms(job_id), ids.delay_seconds(job_id)) == (now_ms, 3600)
    versioned = ids.new_job_id(0, ids.VERSION_WITH_ATTRIBUTES, now_ms)
    assert versioned.startswith("1") and ids.strip_version(versioned)[1] == 1
    assert ids.timestamp_ms(versioned) == now_ms
