"""Job ids: lmstfy's ULIDs, spelled the same by every version of the encoder (store/jobdata.py) and read by ids.py."""

from __future__ import annotations

import multiprocessing
import random
import time

import pytest

from lmstfy_py import ids
from lmstfy_py.store import jobdata
from lmstfy_py.web import middleware


@pytest.mark.parametrize(
    ("raw", "spelled"),
    [
        (bytes(range(16)), "00041061050R3GG28A1C60T3GF"),  # what the earlier, digit-by-digit encoder wrote
        (bytes(16), "00000000000000000000000000"),
        (b"\xff" * 16, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
    ],
)
def test_sixteen_bytes_are_spelled_in_crockfords_base32(raw: bytes, spelled: str) -> None:
    assert jobdata._encode(int.from_bytes(raw, "big")) == spelled
    assert ids._raw(spelled) == raw


def test_a_new_id_carries_its_time_and_delay() -> None:
    now_ms = time.time_ns() // 1_000_000
    job_id = jobdata.new_job_id(delay_seconds=3600, now_ms=now_ms)
    assert ids.is_valid(job_id) and len(job_id) == ids.ULID_LEN
    assert (ids.timestamp_ms(job_id), ids.delay_seconds(job_id)) == (now_ms, 3600)
    versioned = jobdata.new_job_id(0, jobdata.VERSION_WITH_ATTRIBUTES, now_ms)
    assert versioned.startswith("1") and ids.strip_version(versioned)[1] == 1
    assert ids.timestamp_ms(versioned) == now_ms


def _ids_made_in_a_child(now_ms: int) -> list[str]:
    return [jobdata.new_job_id(0, now_ms=now_ms) for _ in range(1000)]


def test_ids_of_one_millisecond_differ_within_a_process_and_across_forked_workers() -> None:
    # Forked workers must not repeat each other's random bits, nor the parent's: it has some read
    # ahead when it forks.
    now_ms = time.time_ns() // 1_000_000
    jobdata.new_job_id(0, now_ms=now_ms)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        made = pool.map(_ids_made_in_a_child, [now_ms, now_ms])
    made.append(_ids_made_in_a_child(now_ms))
    every = [job_id for batch in made for job_id in batch]
    assert len(set(every)) == len(every) == 3000
    assert all(ids.timestamp_ms(job_id) == now_ms and ids.delay_seconds(job_id) == 0 for job_id in every)


@pytest.mark.parametrize("now_ms", [0, 1, 1_700_000_000_123, 2**48 - 1])
def test_the_time_read_back_is_the_time_written_at_the_edges_of_48_bits(now_ms: int) -> None:
    for version in (0, jobdata.VERSION_WITH_ATTRIBUTES):
        job_id = jobdata.new_job_id(2**32 - 1, version, now_ms)
        assert (ids.timestamp_ms(job_id), ids.delay_seconds(job_id)) == (now_ms, 2**32 - 1)
        assert ids.timestamp_ms(job_id) == int.from_bytes(ids._raw(job_id)[:6], "big")


def test_an_application_seeding_random_does_not_make_ids_repeat() -> None:
    # An embedding application (or a library it uses) may seed `random` for itself: replicas that
    # all seeded 42 must still make different ids in the same millisecond.
    now_ms = time.time_ns() // 1_000_000
    random.seed(42)
    first = jobdata.new_job_id(0, now_ms=now_ms)
    random.seed(42)
    assert jobdata.new_job_id(0, now_ms=now_ms) != first


def test_job_ids_do_not_follow_from_the_generator_that_request_ids_show() -> None:
    # Every answer's X-Request-ID shows 128 bits of that generator, and a few hundred answers give
    # its state away: were job ids made from it, a client could predict another's next ids and take
    # them first by publishing with them (its publishes would then make nothing: "duplicate").
    now_ms = time.time_ns() // 1_000_000
    state = middleware._random.getstate()
    first = jobdata.new_job_id(0, now_ms=now_ms)
    middleware._random.setstate(state)
    assert jobdata.new_job_id(0, now_ms=now_ms) != first
    assert middleware.request_id(None) != middleware.request_id(None)
