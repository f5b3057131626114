"""Every data-plane route through Client and AsyncClient against a real server: what each returns,
read from the server's real answers (lmstfy's shapes, and lmstfy-py's beyond them)."""

from __future__ import annotations

import inspect
import time

import pytest

from lmstfy_py.client import AsyncClient, Client, DeadLetter, Job, NotFound, QueueStats, Released, Schedule, Scheduled


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_publish_consume_ack_reads_the_job_as_published(client: Client, namespace: str) -> None:
    job_id = client.publish("q", b"\x00binary\xff", tries=3, ttl=600, attributes={"Trace": "abc"})
    job = client.consume("q", ttr=30)
    assert job is not None
    assert (job.id, job.namespace, job.queue, job.data) == (job_id, namespace, "q", b"\x00binary\xff")
    assert job.attributes == {"trace": "abc"}  # lmstfy lower-cases attribute keys
    assert job.remain_tries == 2 and 595 <= job.ttl <= 600 and job.elapsed_ms >= 0
    assert job.state is None  # a consume answer has no state fields
    client.ack("q", job.id)
    assert client.peek_job("q", job.id) is None
    assert client.consume("q") is None  # 404 "no job available" is no error


def test_a_job_that_never_expires_reads_ttl_0(client: Client) -> None:
    client.publish("q", "forever", ttl=0)
    job = client.consume("q")
    assert job is not None and job.ttl == 0 and job.text() == "forever"


def test_publish_many_and_consume_many_across_queues(client: Client) -> None:
    ids = client.publish_many("q1", [{"order": 1}, "x", 2])
    assert len(ids) == 3
    client.publish("q2", b"second queue")
    jobs = client.consume_many(["q1", "q2"], 10, ttr=30)
    assert [job.id for job in jobs[:3]] == ids  # the queue listed first wins
    assert [job.json() for job in jobs[:3]] == [{"order": 1}, "x", 2]
    assert jobs[3].queue == "q2" and jobs[3].data == b"second queue"
    assert client.consume_many("q1", 1) == []
    one = client.publish("q1", b"one")
    assert [job.id for job in client.consume_many("q1", 1)] == [one]  # count=1 answers an object, read as a list


def test_business_ids_make_a_repeat_a_duplicate(client: Client) -> None:
    assert client.publish("q", b"a", job_id="order-42") == "order-42"
    assert client.publish("q", b"b", job_id="order-42") == "order-42"  # 200 duplicate: nothing created
    assert client.size("q") == 1
    assert client.publish_many("q", ["x", "y"], job_ids=["b1", "order-42"]) == ["b1", "order-42"]
    assert client.size("q") == 2


def test_long_poll_waits_and_a_fractional_ttr_is_sent_in_milliseconds(client: Client) -> None:
    started = time.monotonic()
    assert client.consume("q", timeout=1) is None
    assert time.monotonic() - started >= 0.9
    client.publish("q", b"x", delay=0.2)  # delay_ms=200
    assert client.consume("q") is None
    job = client.consume("q", ttr=0.5, timeout=2)  # ttr_ms=500
    assert job is not None
    due = client.peek_job("q", job.id)
    assert due is not None and due.state == "reserved" and due.due_ms is not None
    assert due.due_ms - now_ms() <= 500


def test_ack_many_acks_more_than_one_batch(client: Client) -> None:
    for _ in range(3):
        client.publish_many("q", list(range(50)))
    jobs = client.consume_many("q", 100) + client.consume_many("q", 100)
    assert len(jobs) == 150
    client.ack_many("q", [job.id for job in jobs])  # two requests: 100 and 50
    assert client.stats("q") == QueueStats(ready=0, delayed=0, reserved=0, dead=0, paused=False)


def test_a_consume_acks_the_jobs_it_is_given_first(client: Client) -> None:
    done = [client.publish("q1", b"a"), client.publish("q2", b"b"), client.publish("q1", b"c", job_id="order:7")]
    assert len(client.consume_many(["q1", "q2"], 10, ttr=30)) == 3
    waiting = client.publish("q1", b"next")
    acked = [("q1", done[0]), ("q2", done[1]), ("q1", "order:7")]
    assert [job.id for job in client.consume_many("q1", 10, ttr=30, ack=acked)] == [waiting]
    assert all(client.peek_job(queue, job_id) is None for queue, job_id in acked)
    assert client.consume("q1", ack=[("q1", waiting)]) is None  # ACKed though nothing came
    assert client.stats("q1") == QueueStats(ready=0, delayed=0, reserved=0, dead=0, paused=False)


def test_worker_verbs_release_touch_bury(client: Client) -> None:
    client.publish("q", b"x", tries=3, backoff="exponential", backoff_ms=60_000)
    job = client.consume("q", ttr=30)
    assert job is not None
    due = client.touch("q", job.id, ttr=100)
    assert 99_000 <= due - now_ms() <= 100_000
    released = client.release("q", job.id, reason="db down")  # its backoff: 60 s
    assert not released.buried and released.remain_tries == 2
    assert released.due_ms is not None and 59_000 <= released.due_ms - now_ms() <= 60_000
    state = client.peek_job("q", job.id)
    assert state is not None
    assert (state.state, state.attempts, state.last_error, state.priority) == ("delayed", 1, "db down", 0)
    client.publish("q", b"y")
    other = client.consume("q")
    assert other is not None
    assert client.release("q", other.id, delay=0) == Released(buried=True)  # no try left
    third = client.publish("q", b"z", tries=5)
    assert client.consume("q") is not None
    client.bury("q", third, reason="bad payload")
    page = client.dead_jobs("q")
    assert [(dead.id, dead.last_error) for dead in page.jobs][-1] == (third, "bad payload")


def test_peek_priority_pause_and_destroy(client: Client) -> None:
    assert client.peek("q") is None  # 404 "the queue is empty" is no error
    low = client.publish("q", b"low")
    high = client.publish("q", b"high", priority=9)
    peeked = client.peek("q")
    assert peeked is not None and peeked.id == high and client.size("q") == 2
    client.pause("q")
    assert client.stats("q").paused and client.consume("q") is None
    client.resume("q")
    first = client.consume("q")
    assert first is not None and first.id == high
    client.destroy("q")
    assert client.size("q") == 0 and client.peek_job("q", low) is None


def test_dead_letter_routes(client: Client) -> None:
    ids = [client.publish("q", f"d{i}".encode()) for i in range(4)]
    for job in client.consume_many("q", 4):
        client.bury("q", job.id, reason="why")
    assert client.dead_letter("q") == DeadLetter(size=4, head=ids[0])
    assert client.dead_letter_size("q") == 4
    first = client.dead_jobs("q", limit=2)
    assert [dead.id for dead in first.jobs] == ids[:2] and first.next == ids[1]
    assert first.jobs[0].data == b"d0" and first.jobs[0].attempts == 1 and first.jobs[0].died_ms > 0
    assert [dead.id for dead in client.dead_jobs("q", after=first.next).jobs] == ids[2:]
    client.respawn_dead_job("q", ids[0], tries=2)
    client.delete_dead_job("q", ids[1])
    assert client.respawn("q", limit=1) == 1
    client.delete_dead("q", limit=5)
    assert client.dead_letter("q") == DeadLetter(size=0, head="")
    assert sorted(job.id for job in client.consume_many("q", 10)) == sorted(ids[::2])


def test_republish_acks_the_old_job_and_publishes_a_new_one(client: Client) -> None:
    client.publish("q", b"old")
    old = client.consume("q")
    assert old is not None
    new_id = client.republish("q", old.id, b"new", delay=0)
    assert new_id != old.id and client.peek_job("q", old.id) is None
    new = client.consume("q")
    assert new is not None and (new.id, new.data) == (new_id, b"new")


async def test_the_async_client_speaks_the_same(aclient: AsyncClient, namespace: str) -> None:
    job_id = await aclient.publish("q", b"async", tries=2)
    jobs = await aclient.consume_many("q", 5, ttr=10)
    assert [(job.id, job.namespace, job.data) for job in jobs] == [(job_id, namespace, b"async")]
    assert await aclient.touch("q", job_id, ttr=20) > now_ms()
    assert (await aclient.release("q", job_id, delay=0)).remain_tries == 1
    assert isinstance(await aclient.peek("q"), Job)
    again = await aclient.consume("q", timeout=1)
    assert again is not None
    await aclient.ack_many("q", [again.id])
    assert await aclient.stats("q") == QueueStats(0, 0, 0, 0, False)
    job_id = await aclient.publish("q", b"acked by a consume")
    assert [job.id for job in await aclient.consume_many("q", 5, ttr=10)] == [job_id]
    assert await aclient.consume_many("q", 5, ack=[("q", job_id)]) == []
    assert await aclient.stats("q") == QueueStats(0, 0, 0, 0, False)


def test_recurring_jobs_register_list_fire_replace_and_delete(client: Client, namespace: str) -> None:
    before = now_ms()
    first = client.schedule("q", "beat", b"tick", every=1, ttl=600, tries=2, priority=3)
    assert first.created and before + 1000 <= first.next_ms <= now_ms() + 1000
    nightly = client.schedule("q", "nightly", "report", cron="@daily", tz="Europe/Paris", catchup="none")
    assert nightly.created and nightly.next_ms > now_ms()
    assert [s.name for s in client.schedules("q")] == ["beat", "nightly"]
    assert client.get_schedule("q", "nightly") == Schedule(
        "nightly", "0 0 * * *", None, "Europe/Paris", 86400, 1, 0, "none", nightly.next_ms, None, None
    )
    job = client.consume("q", timeout=3)  # the first tick of `beat` published it
    assert job is not None and (job.data, job.remain_tries) == (b"tick", 1) and 595 <= job.ttl <= 600
    beat = client.get_schedule("q", "beat")
    assert beat is not None and (beat.every, beat.cron, beat.tries, beat.priority) == (1, None, 2, 3)
    assert beat.last_job_id == job.id and beat.last_ms is not None
    replaced = client.schedule("q", "beat", b"tock", every=3600)
    assert not replaced.created and replaced.next_ms > now_ms() + 3_500_000
    client.delete_schedule("q", "beat")
    assert client.get_schedule("q", "beat") is None  # a look-up that finds nothing is no error
    with pytest.raises(NotFound, match="schedule not found"):
        client.delete_schedule("q", "beat")
    assert [s.name for s in client.schedules("q")] == ["nightly"]


async def test_the_async_client_schedules_too(aclient: AsyncClient) -> None:
    assert await aclient.schedule("q", "beat", b"x", cron="*/5 * * * *") == Scheduled(
        True, (await aclient.schedules("q"))[0].next_ms
    )
    found = await aclient.get_schedule("q", "beat")
    assert found is not None and found.cron == "*/5 * * * *" and found.tz == "UTC"
    await aclient.delete_schedule("q", "beat")
    assert await aclient.schedules("q") == []


def test_both_clients_offer_the_same_methods_with_the_same_parameters() -> None:
    def methods(cls: type) -> dict[str, list[inspect.Parameter]]:
        found = {}
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and name != "close":
                found[name] = list(inspect.signature(member).parameters.values())
        return found

    assert methods(Client) == methods(AsyncClient)
    assert {"publish", "consume_many", "ack_many", "release", "touch", "bury", "dead_jobs", "pause", "schedule"} <= set(
        methods(Client)
    )
