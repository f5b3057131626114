"""The default prefetch (pace.py): what quick and slow handlers make a worker hold, on a made-up clock."""

from __future__ import annotations

from lmstfy_py.worker.pace import MAX_AUTO_PREFETCH, RATE_WINDOW_S, Pace


def run_at(pace: Pace, start: float, jobs_per_s: float, round_trip_s: float, seconds: float) -> float:
    """Handlers finishing `jobs_per_s` and full consumes taking `round_trip_s`, for `seconds`; the end time."""
    now, step = start, RATE_WINDOW_S
    while now < start + seconds:
        for _ in range(round(jobs_per_s * step)):
            pace.finished()
        pace.consumed(round_trip_s)
        now += step
        pace.prefetch(now)
    return now


def test_before_anything_is_measured_the_buffer_is_the_concurrency() -> None:
    assert Pace(16, now=0.0).prefetch(0.0) == 16
    assert Pace(16, now=0.0).prefetch(5.0) == 16  # a window with nothing finished


def test_the_buffer_covers_what_the_handlers_finish_in_two_round_trips() -> None:
    pace = Pace(8, now=0.0)
    end = run_at(pace, 0.0, jobs_per_s=5_000, round_trip_s=0.01, seconds=2)
    assert pace.prefetch(end) == 100  # 2 x 5,000/s x 10 ms


def test_quick_handlers_are_capped_and_slow_ones_keep_the_floor() -> None:
    pace = Pace(8, now=0.0)
    end = run_at(pace, 0.0, jobs_per_s=50_000, round_trip_s=0.02, seconds=2)
    assert pace.prefetch(end) == MAX_AUTO_PREFETCH
    end = run_at(pace, end, jobs_per_s=10, round_trip_s=0.02, seconds=3)  # the handlers became slow
    assert pace.prefetch(end) == 8


def test_a_concurrency_above_the_cap_is_the_floor() -> None:
    pace = Pace(MAX_AUTO_PREFETCH + 500, now=0.0)
    end = run_at(pace, 0.0, jobs_per_s=50_000, round_trip_s=0.02, seconds=1)
    assert pace.prefetch(end) == MAX_AUTO_PREFETCH + 500


def test_a_rise_is_taken_at_once_and_a_fall_is_smoothed() -> None:
    """While the buffer bounds quick handlers, each window measures only what it let through: a
    smoothed rise took four windows or more to reach their pace. A quiet window shrinks it slowly."""
    pace = Pace(64, now=0.0)
    end = run_at(pace, 0.0, jobs_per_s=4_000, round_trip_s=0.03, seconds=RATE_WINDOW_S)
    assert pace.prefetch(end) == 240  # 2 x 4,000/s x 30 ms
    end = run_at(pace, end, jobs_per_s=9_000, round_trip_s=0.03, seconds=RATE_WINDOW_S)
    assert pace.prefetch(end) == 540  # the next window's pace at once, not a third of the way
    end = run_at(pace, end, jobs_per_s=0, round_trip_s=0.03, seconds=RATE_WINDOW_S)
    assert pace.prefetch(end) == 378  # 540 - 30 % of the fall
