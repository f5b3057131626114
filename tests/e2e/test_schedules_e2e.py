"""Recurring jobs across real `lmstfy-py serve` processes sharing one Redis: two servers (two
workers each) give exactly one job per tick; ticks missed while no server ran give one catch-up job.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from benchmarks.harness.lmstfy_servers import Server, create_token
from lmstfy_py import ids

NS, QUEUE = "cron-e2e", "q"


def register(server: Server, token: str, **query: object) -> int:
    url = f"{server.data_url}/api/{NS}/{QUEUE}/cron/beat"
    answer = httpx.put(url, params={"token": token, **query}, content=b"beat")
    assert answer.status_code == 201, answer.text
    next_ms: int = answer.json()["next_ms"]
    return next_ms


def fire_times(server: Server, token: str) -> list[int]:
    """When each job of the queue was published (its id's time), consuming them all."""
    url = f"{server.data_url}/api/{NS}/{QUEUE}"
    answer = httpx.get(url, params={"token": token, "count": 100, "timeout": 0})
    if answer.status_code == 404:
        return []
    assert answer.status_code == 200, answer.text
    jobs = answer.json()
    return sorted(ids.timestamp_ms(job["job_id"]) for job in (jobs if isinstance(jobs, list) else [jobs]))


def test_two_servers_give_exactly_one_job_per_tick(two_lmstfy_servers: tuple[Server, Server]) -> None:
    first, second = two_lmstfy_servers
    token = create_token(first, NS)
    first_tick = register(first, token, every=1)
    time.sleep(max(0.0, (first_tick + 3_500) / 1000 - time.time()))  # ticks at +0, +1 s, +2 s, +3 s
    answer = httpx.delete(f"{second.data_url}/api/{NS}/{QUEUE}/cron/beat", params={"token": token})
    assert answer.status_code == 204
    fired = fire_times(first, token)
    assert len(fired) >= 3
    # One job per tick: tick k fired at first_tick + k s (a little late at most), no tick twice, none skipped.
    assert [round((at - first_tick) / 1000) for at in fired] == list(range(len(fired)))
    assert all(0 <= (at - first_tick) % 1000 < 500 for at in fired)


def test_ticks_missed_while_no_server_ran_give_one_job(tmp_path: Path, redis_url: str) -> None:
    with Server(tmp_path, redis_url=redis_url, args=["--workers", "1"]) as server:
        server.start()
        token = create_token(server, NS)
        first_tick = register(server, token, every=3, catchup="one")
        time.sleep(max(0.0, (first_tick - 2000) / 1000 - time.time()))
        server.stop()
        time.sleep(8.0)  # ticks at +3 s, +6 s (and maybe +9 s) missed, the oldest beyond the 5 s grace
        restarting_at = time.time() * 1000
        server.start()
        ready_at = time.time() * 1000
        time.sleep(0.7)
        fired = fire_times(server, token)
        fetched_at = time.time() * 1000
    # The first job is the one catch-up for all the missed ticks, made by the restarted server. Any
    # other is a tick that came after the restart, on its tick, one job per tick: a tick can fall
    # within the restart's first second (seen in CI), so "later than the catch-up" is not a time.
    catch_up, *on_tick = fired
    assert restarting_at < catch_up < ready_at + 500  # at once, not at the next tick
    ticks_after_restart = [
        first_tick + k * 3000 for k in range(10) if restarting_at <= first_tick + k * 3000 <= fetched_at
    ]
    assert len(on_tick) <= len(ticks_after_restart)
    assert all((at - first_tick) % 3000 < 500 and at >= restarting_at for at in on_tick)
    assert len({(at - first_tick) // 3000 for at in on_tick}) == len(on_tick)
