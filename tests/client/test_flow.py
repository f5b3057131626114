"""SPEC 14 through Client and AsyncClient against a real server: groups, the limits in settings,
promote, and the delay horizon in stats."""

from __future__ import annotations

import time

import pytest

from lmstfy_py.client import AsyncClient, BadRequest, Client, Conflict, DueBuckets, NotFound, Settings


def test_a_publish_with_a_group_shows_it_in_the_jobs_state(client: Client) -> None:
    grouped = client.publish("q", b"a", group="customer-1")
    plain = client.publish("q", b"b")
    bulk = client.publish_many("q", [1, 2], group="order:42")
    jobs = [client.peek_job("q", job_id) for job_id in [grouped, plain, *bulk]]
    assert [job.group if job else "gone" for job in jobs] == ["customer-1", None, "order:42", "order:42"]
    with pytest.raises(BadRequest, match="invalid group"):
        client.publish("q", b"c", group="no spaces")


def test_settings_set_and_unset_the_limits(client: Client) -> None:
    assert client.settings("q") == Settings(keep=0, events=0, max_reserved=0, rate=0.0, burst=None)
    limited = client.settings("q", max_reserved=2, rate=0.5, burst=3, group_concurrency=4)
    assert limited == Settings(keep=0, events=0, max_reserved=2, rate=0.5, burst=3, group_concurrency=4)
    assert client.settings("q", burst=None).burst is None  # sent as an empty burst=: back to the default
    assert client.settings("q", rate=1e-05).rate == 1e-05  # sent as 0.00001, the digits the server reads
    assert client.settings("q", rate="2.25").rate == 2.25
    with pytest.raises(BadRequest, match="invalid max_reserved"):
        client.settings("q", rate=7, max_reserved=-1)
    assert client.settings("q") == Settings(0, 0, 2, 2.25, None, 4)  # the refused PUT changed nothing


def test_promote_makes_a_delayed_job_ready_and_stats_show_the_horizon(client: Client) -> None:
    later = client.publish("q", b"later", delay=600, priority=5, group="g")
    client.publish("q", b"in two days", delay=2 * 86400, ttl=0)
    stats = client.stats("q")
    assert (stats.delayed, stats.ready, stats.oldest_ready_ms) == (2, 0, None)
    assert stats.due == DueBuckets(within_1m=0, within_1h=1, within_1d=0, later=1)
    before = int(time.time() * 1000)
    client.promote("q", later)
    promoted = client.peek_job("q", later)
    assert promoted is not None and (promoted.state, promoted.priority, promoted.group) == ("ready", 5, "g")
    stats = client.stats("q")
    assert stats.ready == 1 and stats.due == DueBuckets(later=1)
    assert stats.oldest_ready_ms is not None and before - 1000 <= stats.oldest_ready_ms <= time.time() * 1000
    with pytest.raises(Conflict, match="job is not delayed"):
        client.promote("q", later)
    with pytest.raises(NotFound, match="job not found"):
        client.promote("q", "nosuchjob")


async def test_the_async_client_promotes_and_reads_the_horizon(aclient: AsyncClient) -> None:
    job_id = await aclient.publish("q", b"x", delay=30, group="g")
    assert (await aclient.stats("q")).due == DueBuckets(within_1m=1)
    assert (await aclient.settings("q", group_concurrency=2)).group_concurrency == 2
    await aclient.promote("q", job_id)
    job = await aclient.consume("q", ttr=30)
    assert job is not None and job.id == job_id
    assert (await aclient.peek_job("q", job_id)).group == "g"  # type: ignore[union-attr]
