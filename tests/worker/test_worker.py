"""The Worker against a real server: jobs handled and ACKed, N handlers really at once, failures
released with the job's backoff, Bury, leases kept past ttr, sync and async handlers, and a
server that restarts or loses its Redis under a running worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token
from lmstfy_py.client import Bury, Client, Job
from lmstfy_py.worker import Worker
from lmstfy_py.worker.pace import FETCHERS, MAX_AUTO_PREFETCH
from lmstfy_py.worker.run import STOPPED_REASON
from tests.fixtures.push_endpoints import served_in_thread
from tests.worker.conftest import drained, reserved_and_ready, running, wait_until


def make_worker(
    lmstfy_server: Server, namespace: str, token: str, handler: Callable[[Job], Any], **more: Any
) -> Worker:
    options: dict[str, Any] = {"concurrency": 4, "poll": 1, "grace": 5.0} | more
    return Worker(handler, url=lmstfy_server.data_url, token=token, namespace=namespace, **options)


def both_kinds(record: Callable[[Job], None], seconds: float = 0.0) -> dict[str, Callable[[Job], Any]]:
    """`record` called by a sync handler (sleeping on its thread) and by an async one (on the loop)."""

    def sync_handler(job: Job) -> None:
        record(job)
        time.sleep(seconds)

    async def async_handler(job: Job) -> None:
        record(job)
        await asyncio.sleep(seconds)

    return {"sync": sync_handler, "async": async_handler}


def endless_noting(started: list[str]) -> Callable[[Job], Awaitable[None]]:
    """An async handler that notes its job's id and never ends by itself."""

    async def endless(job: Job) -> None:
        started.append(job.id)
        await asyncio.sleep(60)

    return endless


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_jobs_of_several_queues_are_handled_and_acked(
    lmstfy_server: Server, namespace: str, token: str, client: Client, kind: str
) -> None:
    seen: list[Job] = []
    published = {client.publish(q, f"{q}{i}", attributes={"n": str(i)}): (q, i) for q in "ab" for i in range(10)}
    with running(
        make_worker(lmstfy_server, namespace, token, both_kinds(seen.append)[kind], queues=["a", "b"])
    ) as worker:
        wait_until(lambda: len(seen) == 20 and drained(client, "a", "b"), what="all handled and ACKed")
    assert worker.tally.processed == 20 and worker.tally.failed == 0
    assert sorted(job.id for job in seen) == sorted(published)
    for job in seen:
        q, i = published[job.id]
        assert (job.queue, job.data, job.attributes) == (q, f"{q}{i}".encode(), {"n": str(i)})
    assert all(client.peek_job(job.queue, job.id) is None for job in seen)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_concurrency_handlers_really_run_at_once(
    lmstfy_server: Server, namespace: str, token: str, client: Client, kind: str
) -> None:
    spans: list[tuple[float, float]] = []  # when each handler began and ended

    def sync_handler(job: Job) -> None:
        began = time.monotonic()
        time.sleep(0.3)
        spans.append((began, time.monotonic()))

    async def async_handler(job: Job) -> None:
        began = time.monotonic()
        await asyncio.sleep(0.3)
        spans.append((began, time.monotonic()))

    handler = {"sync": sync_handler, "async": async_handler}[kind]
    client.publish_many("q", list(range(16)))
    with running(make_worker(lmstfy_server, namespace, token, handler, queues="q", concurrency=8)):
        wait_until(lambda: len(spans) == 16 and drained(client, "q"), what="all handled")
    # An end sorts before a start at the same instant: touching spans do not overlap.
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running_now, most = 0, 0
    for _, step in edges:
        running_now += step
        most = max(most, running_now)
    assert most == 8  # the 8 slots filled at once, never more
    first_wave = sorted(start for start, _ in spans)[:8]
    assert first_wave[-1] - first_wave[0] < 0.25  # started together, not one after another


def test_a_failure_is_released_with_the_jobs_backoff_then_succeeds(
    lmstfy_server: Server, namespace: str, token: str, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[float] = []

    def flaky(job: Job) -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise ValueError("boom")

    job_id = client.publish("q", b"x", tries=3, backoff="exponential", backoff_ms=600)
    with (
        caplog.at_level(logging.WARNING, "lmstfy_py.worker"),
        running(make_worker(lmstfy_server, namespace, token, flaky, queues="q")),
    ):
        wait_until(lambda: len(attempts) == 1)
        wait_until(lambda: (client.peek_job("q", job_id) or Job("", "", "", b"")).state == "delayed")
        state = client.peek_job("q", job_id)
        assert state is not None and (state.last_error, state.attempts) == ("ValueError: boom", 1)
        wait_until(lambda: len(attempts) == 2 and drained(client, "q"), what="the second attempt")
    assert attempts[1] - attempts[0] >= 0.6  # not before its backoff
    assert client.peek_job("q", job_id) is None  # the second attempt succeeded: ACKed
    failures = [r.getMessage() for r in caplog.records if job_id in r.getMessage()]
    assert len(failures) == 1 and "ValueError: boom" in failures[0] and "released" in failures[0], failures


def test_bury_sends_the_job_to_the_dead_letter_at_once(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    calls: list[str] = []

    async def refuse(job: Job) -> None:
        calls.append(job.id)
        raise Bury("bad payload")

    job_id = client.publish("q", b"x", tries=5)
    with running(make_worker(lmstfy_server, namespace, token, refuse, queues="q")) as worker:
        wait_until(lambda: client.dead_letter_size("q") == 1)
    assert calls == [job_id] and worker.tally.failed == 1  # never tried again, tries left or not
    [dead] = client.dead_jobs("q").jobs
    assert (dead.id, dead.last_error, dead.attempts) == (job_id, "bad payload", 1)


def test_the_reason_is_cut_to_what_the_server_keeps(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    def fail(job: Job) -> None:
        raise ValueError("é" * 1000)  # 2,000 bytes of UTF-8

    client.publish("q", b"x")  # tries=1: the release buries it, with the reason
    with running(make_worker(lmstfy_server, namespace, token, fail, queues="q")):
        wait_until(lambda: client.dead_letter_size("q") == 1)
    reason = client.dead_jobs("q").jobs[0].last_error
    assert reason is not None and reason.startswith("ValueError: éé")
    assert 1020 <= len(reason.encode()) <= 1024


def test_a_lease_is_touched_while_a_handler_runs_past_its_ttr(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    deliveries: Counter[str] = Counter()

    async def slow(job: Job) -> None:
        deliveries[job.id] += 1
        await asyncio.sleep(3)

    job_id = client.publish("q", b"x", tries=3)
    with running(make_worker(lmstfy_server, namespace, token, slow, queues="q", ttr=2, concurrency=2)):
        wait_until(lambda: drained(client, "q") and sum(deliveries.values()) == 1, timeout=15)
    assert deliveries == {job_id: 1}  # without its touches it would have come back after 2 s
    assert client.peek_job("q", job_id) is None


def test_a_server_restart_under_a_running_worker_loses_no_job(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lmstfy_server = Server(tmp_path)
    with lmstfy_server:
        lmstfy_server.start()
        token = create_token(lmstfy_server, "restart")
        seen: Counter[str] = Counter()

        async def handle(job: Job) -> None:
            seen[job.id] += 1
            await asyncio.sleep(0.01)

        with Client(lmstfy_server.data_url, "restart", token) as client:
            published = [job_id for _ in range(4) for job_id in client.publish_many("q", list(range(50)))]
            worker = make_worker(lmstfy_server, "restart", token, handle, queues="q", ttr=30)
            with running(worker):
                wait_until(lambda: len(seen) >= 30)
                assert lmstfy_server.stop() == 0  # consumes and ACKs now meet refused connections
                time.sleep(0.5)
                lmstfy_server.start()
                wait_until(lambda: len(seen) == 200 and drained(client, "q"), timeout=30, what="all handled")
            assert set(seen) == set(published)
            assert client.dead_letter_size("q") == 0
    assert any("cannot reach the server" in record.getMessage() for record in caplog.records)


def test_a_worker_rides_out_503s_while_redis_is_frozen(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Server(tmp_path) as lmstfy_server:
        lmstfy_server.start()
        token = create_token(lmstfy_server, "frozen")
        seen: set[str] = set()

        async def handle(job: Job) -> None:
            seen.add(job.id)
            await asyncio.sleep(0.05)

        with Client(lmstfy_server.data_url, "frozen", token) as client:
            published = set(client.publish_many("q", list(range(40)), tries=3))
            # A consume Redis ran while the server had given up on it (503 "redis timed out") left
            # its jobs reserved: they come back after their ttr (kept short here) with a try less,
            # as when a worker dies.
            with running(make_worker(lmstfy_server, "frozen", token, handle, queues="q", concurrency=2, ttr=2)):
                wait_until(lambda: len(seen) >= 5)
                os.kill(lmstfy_server.redis_pid, signal.SIGSTOP)  # a command gives up after 2 s: 503
                try:
                    time.sleep(2.6)
                finally:
                    os.kill(lmstfy_server.redis_pid, signal.SIGCONT)
                wait_until(lambda: seen == published and drained(client, "q"), timeout=30, what="all handled")
            assert client.dead_letter_size("q") == 0
    assert any("503 storage unavailable" in record.getMessage() for record in caplog.records)


def test_a_stop_releases_what_did_not_finish_within_the_grace(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []
    endless = endless_noting(started)

    kept = client.publish("q", b"x", tries=2)
    last_try = client.publish("q", b"y", tries=1)
    worker = make_worker(lmstfy_server, namespace, token, endless, queues="q", grace=0.3, ttr=60)
    began = time.monotonic()
    with running(worker):
        wait_until(lambda: len(started) == 2)
    assert time.monotonic() - began < 10 and worker.tally.given_back == 2
    # Ready again at once for another worker, not reserved until its ttr; a job with no try left
    # cannot go to another worker: it is in the dead letter, saying why.
    job = client.peek_job("q", kept)
    assert job is not None and (job.state, job.last_error) == ("ready", STOPPED_REASON)
    assert [(dead.id, dead.last_error) for dead in client.dead_jobs("q").jobs] == [(last_try, STOPPED_REASON)]


def test_a_second_stop_skips_what_is_left_of_the_grace(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []

    def endless(job: Job) -> None:
        started.append(job.id)
        time.sleep(60)  # a sync handler: its thread cannot be stopped, the worker goes all the same

    job_id = client.publish("q", b"x", tries=2)
    worker = make_worker(lmstfy_server, namespace, token, endless, queues="q", grace=60)
    with running(worker):
        wait_until(lambda: started == [job_id])
        worker.stop()
        stopped_at = time.monotonic()
        time.sleep(0.2)
        worker.stop()
    assert time.monotonic() - stopped_at < 5  # not the 60 s of grace
    job = client.peek_job("q", job_id)
    assert job is not None and (job.state, job.last_error) == ("ready", STOPPED_REASON)


class HoldingProxy:
    """A real TCP proxy to the server that holds every request of `method` `seconds` before passing it
    on, or drops it if its client closed the connection meanwhile; it notes how many it held at once
    at most, and which of its connections they came on."""

    def __init__(self, lmstfy_server: Server, seconds: float, method: bytes) -> None:
        self.host, port = lmstfy_server.data_url.removeprefix("http://").split(":")
        self.port, self.seconds, self.method = int(port), seconds, method
        self.writers: list[asyncio.StreamWriter] = []
        self.relays: list[asyncio.Task[Any]] = []
        self.proxy: asyncio.Server | None = None
        self.held = self.most_held = 0
        self.held_on: set[int] = set()  # the connections (numbered as they came) that had one held

    async def start(self) -> str:
        """Listening: its URL."""
        self.proxy = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        host, port = self.proxy.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def stop(self) -> None:
        assert self.proxy is not None
        self.proxy.close()
        for writer in self.writers:  # every relayed connection, both ends: their pipes end
            writer.close()
        await asyncio.gather(*self.relays, return_exceptions=True)
        await self.proxy.wait_closed()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if (task := asyncio.current_task()) is not None:
            self.relays.append(task)
        number = len(self.relays)
        server_reader, server_writer = await asyncio.open_connection(self.host, self.port)
        self.writers += [client_writer, server_writer]
        await asyncio.gather(
            self._pipe(client_reader, server_writer, number), self._pipe(server_reader, client_writer, None)
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int | None) -> None:
        """Relays one direction; `number`: this is the client's side, whose requests may be held."""
        try:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    if number is not None and data.startswith(self.method):
                        await self._hold(number)
                        if reader.at_eof():
                            break  # the client gave up on it: as if it had never been sent
                    writer.write(data)
                    await writer.drain()
        finally:
            writer.close()

    async def _hold(self, number: int) -> None:
        self.held += 1
        self.most_held = max(self.most_held, self.held)
        self.held_on.add(number)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.held -= 1


def test_a_stop_waits_for_the_ack_round_in_flight(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # The handlers end at once; their batch ACK takes 3 s to reach the server; the stop comes
    # meanwhile. Cancelling that round dropped its ids: the jobs stayed reserved until their ttr.
    handled: list[str] = []

    async def quick(job: Job) -> None:
        handled.append(job.id)

    published = client.publish_many("q", [str(i) for i in range(10)])
    proxy = HoldingProxy(lmstfy_server, 3.0, b"DELETE")
    with served_in_thread(proxy.start, proxy.stop) as url:
        worker = Worker(quick, url=url, token=token, namespace=namespace, queues="q", concurrency=4, poll=1)
        with running(worker):
            wait_until(lambda: len(handled) == 10, what="every job handled")
            time.sleep(0.2)  # the ACK round is on its way, held by the proxy
        assert worker.tally.processed == 10
    assert sorted(handled) == sorted(published)
    assert drained(client, "q")  # ACKed, none left reserved for its ttr


def test_quick_handlers_keep_every_consume_loop_in_flight_each_on_its_own_connection(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # What makes a busy worker fast: FETCHERS (12) consumes in flight, which the server and Redis
    # serve several per turn (one fsync for all), each on a connection (a client) of its own.
    for _ in range(3_000 // 50):
        client.publish_many("q", ["x"] * 50)
    proxy = HoldingProxy(lmstfy_server, 0.5, b"GET")

    async def noop(job: Job) -> None:
        pass

    with served_in_thread(proxy.start, proxy.stop) as url:
        prefetch = MAX_AUTO_PREFETCH  # room for every loop's consume of 100
        worker = Worker(noop, url=url, token=token, namespace=namespace, queues="q", concurrency=4, prefetch=prefetch)
        with running(worker):
            wait_until(lambda: worker.tally.processed >= 1_500, what="1,500 jobs handled", timeout=30)
        assert (proxy.most_held, len(proxy.held_on)) == (FETCHERS, FETCHERS)


# -- prefetch ----------------------------------------------------------------------------------


def test_prefetched_jobs_wait_for_a_slot_and_go_back_untried_at_a_stop(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []
    endless = endless_noting(started)

    # One try each: a job whose handler never ran must not reach the dead letter at the stop.
    published = client.publish_many("q", [str(i) for i in range(8)])
    worker = make_worker(lmstfy_server, namespace, token, endless, queues="q", concurrency=2, prefetch=3, grace=0.2)
    with running(worker):
        wait_until(lambda: len(started) == 2 and client.stats("q").reserved == 5, what="2 running, 3 held")
        time.sleep(0.3)  # nothing more is consumed, and no third handler starts
        assert (len(started), *reserved_and_ready(client, "q")) == (2, 5, 3)
    assert worker.tally.given_back == 5
    # The 2 that ran used their only try (released at the stop, they could only go to the dead letter).
    assert sorted(dead.id for dead in client.dead_jobs("q").jobs) == sorted(started)
    untried = [client.peek_job("q", job_id) for job_id in published if job_id not in started]
    # The 3 held and the 3 never consumed: ready, every try left, no attempt, no error.
    assert [(j.state, j.remain_tries, j.attempts, j.last_error) for j in untried if j] == [("ready", 1, 0, None)] * 6


def test_a_stop_gives_back_held_jobs_a_few_at_a_time(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # Sent all at once, the hundreds of jobs a busy worker holds opened up to 100 connections to
    # the server at every stop.
    started: list[str] = []
    client.publish_many("q", [str(i) for i in range(50)], tries=2)
    proxy = HoldingProxy(lmstfy_server, 0.2, b"PUT")  # every release (and touch) waits 0.2 s on its way
    with served_in_thread(proxy.start, proxy.stop) as url:
        handler = endless_noting(started)
        worker = Worker(
            handler, url=url, token=token, namespace=namespace, queues="q", concurrency=2, prefetch=48, grace=0
        )
        with running(worker):
            wait_until(lambda: len(started) == 2 and client.stats("q").reserved == 50, what="2 running, 48 held")
    assert worker.tally.given_back == 50
    assert reserved_and_ready(client, "q") == (0, 50)
    assert 1 <= proxy.most_held <= 16  # 50 before


def test_prefetch_0_holds_no_more_jobs_than_slots(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []
    endless = endless_noting(started)

    client.publish_many("q", [str(i) for i in range(6)], tries=2)
    worker = make_worker(lmstfy_server, namespace, token, endless, queues="q", concurrency=2, prefetch=0, grace=0)
    with running(worker):
        wait_until(lambda: len(started) == 2)
        time.sleep(0.3)
        assert reserved_and_ready(client, "q") == (2, 4)


def test_a_prefetched_job_waiting_half_its_ttr_goes_back_untried_and_runs_when_a_slot_frees(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    deliveries: Counter[str] = Counter()

    async def slow(job: Job) -> None:
        deliveries[job.id] += 1
        await asyncio.sleep(2.5)

    # One slot: the second job would wait 2.5 s for it, past its 2 s ttr. It goes back untried at
    # half its ttr (another worker could run it meanwhile), is not taken again while the slot is
    # busy, and is consumed again once the slot frees.
    first, second = client.publish_many("q", ["a", "b"], tries=3)
    with running(make_worker(lmstfy_server, namespace, token, slow, queues="q", ttr=2, concurrency=1, prefetch=1)):
        wait_until(lambda: deliveries == {first: 1} and client.stats("q").reserved == 2, what="1 running, 1 held")
        wait_until(lambda: (client.peek_job("q", second) or Job("", "", "", b"")).state == "ready", timeout=2.5)
        back = client.peek_job("q", second)
        assert back is not None and (back.remain_tries, back.attempts, back.last_error) == (3, 0, None)
        assert deliveries == {first: 1}  # the first still runs
        wait_until(lambda: drained(client, "q") and sum(deliveries.values()) == 2, timeout=15)
    assert deliveries == {first: 1, second: 1}


def hung_until(gate: threading.Event, started: list[str]) -> Callable[[Job], None]:
    """A sync handler that notes its job and hangs until `gate` is set (then returns at once)."""

    def handler(job: Job) -> None:
        started.append(job.id)
        gate.wait(60)

    return handler


def test_jobs_held_by_a_wedged_worker_go_to_another_worker_untried(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # Both handlers of the first worker hang; the 10 jobs it prefetched went on being touched, so
    # they stayed reserved until it stopped while a second worker sat idle.
    started: list[str] = []
    handled: list[str] = []
    gate = threading.Event()
    published = client.publish_many("q", [str(i) for i in range(12)])  # one try each
    hung = hung_until(gate, started)
    wedged = make_worker(lmstfy_server, namespace, token, hung, queues="q", concurrency=2, prefetch=10, ttr=2, grace=0)
    try:
        with running(wedged):
            wait_until(lambda: len(started) == 2 and client.stats("q").reserved == 12, what="2 running, 10 held")
            held_since = time.monotonic()
            idle = make_worker(lmstfy_server, namespace, token, lambda job: handled.append(job.id), queues="q")
            with running(idle):
                wait_until(lambda: len(handled) == 10, timeout=6, what="the held jobs handled by the other worker")
                assert time.monotonic() - held_since < 2 * wedged.ttr
                wait_until(lambda: client.stats("q").reserved == 2, what="their ACKs")
            # Delivered with their only try: given back untried, not expired (which would bury them).
            assert sorted(handled) == sorted(set(published) - set(started))
            assert client.dead_letter_size("q") == 0 and wedged.tally.given_back == 10
            assert reserved_and_ready(client, "q") == (2, 0)  # the wedged worker took nothing back
    finally:
        gate.set()


def test_a_wedged_worker_does_not_take_back_what_it_gave_back_until_its_handlers_finish(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []
    gate = threading.Event()
    published = client.publish_many("q", [str(i) for i in range(12)])
    worker = make_worker(
        lmstfy_server, namespace, token, hung_until(gate, started), queues="q", concurrency=2, prefetch=10, ttr=2
    )
    try:
        with running(worker):
            wait_until(lambda: len(started) == 2 and client.stats("q").reserved == 12, what="2 running, 10 held")
            wait_until(lambda: reserved_and_ready(client, "q") == (2, 10), timeout=2, what="the held jobs given back")
            back = [client.peek_job("q", job_id) for job_id in published if job_id not in started]
            untried = [(j.state, j.remain_tries, j.attempts, j.last_error) for j in back if j]
            assert untried == [("ready", 1, 0, None)] * 10  # every try left, no attempt, no error
            # Two ttrs with every handler hung: no consume takes them back, none is given back twice.
            seen: set[tuple[int, int]] = set()
            for _ in range(20):
                seen.add(reserved_and_ready(client, "q"))
                time.sleep(0.2)
            assert seen == {(2, 10)} and worker.tally.given_back == 10 and len(started) == 2
            gate.set()  # the handlers finish: the worker consumes again, as many as it can start
            wait_until(lambda: drained(client, "q"), what="all handled")
        assert worker.tally.processed == 12 and sorted(started) == sorted(published)
        assert client.dead_letter_size("q") == 0
    finally:
        gate.set()


def test_a_freed_slot_waits_for_half_a_consume_before_asking_for_more(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # 8 slots + 8 held, consumes of 8: in hand 16; a new consume once 4 have room, not 1 per slot.
    gate = threading.Semaphore(0)
    client.publish_many("q", [str(i) for i in range(40)])

    def handler(job: Job) -> None:
        gate.acquire()

    worker = make_worker(lmstfy_server, namespace, token, handler, queues="q", concurrency=8, prefetch=8, count=8)
    with running(worker):
        wait_until(lambda: reserved_and_ready(client, "q") == (16, 24), what="16 in hand")
        for in_hand in (15, 14, 13):
            gate.release()
            wait_until(lambda n=in_hand: client.stats("q").reserved == n, what=f"{16 - in_hand} ACKed")
            time.sleep(0.3)  # room for fewer than 4: nothing consumed
            assert reserved_and_ready(client, "q") == (in_hand, 24)
        gate.release()
        wait_until(lambda: reserved_and_ready(client, "q") == (16, 20), what="one consume of 4")
        for _ in range(40):
            gate.release()
        wait_until(lambda: drained(client, "q"), what="all handled")
    assert worker.tally.processed == 40


def test_by_default_slow_handlers_hold_no_more_than_the_concurrency_in_waiting(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    started: list[str] = []
    client.publish_many("q", [str(i) for i in range(20)], tries=2)
    with running(
        make_worker(lmstfy_server, namespace, token, endless_noting(started), queues="q", concurrency=3, grace=0)
    ):
        wait_until(lambda: len(started) == 3, what="3 running")
        time.sleep(0.5)  # the handlers finish nothing: the buffer stays at the concurrency
        assert reserved_and_ready(client, "q") == (6, 14)


def test_by_default_quick_handlers_get_a_larger_buffer(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    # 3,000 jobs end at once, then every handler blocks: what is in hand then is what the quick
    # ones made the worker ask for (about two consume round trips of their pace), far beyond the
    # concurrency's worth that a fixed buffer of that size would hold.
    quick, gate = 3_000, threading.Event()
    handled: list[str] = []

    async def quick_then_blocked(job: Job) -> None:
        handled.append(job.id)
        if len(handled) > quick:
            await asyncio.to_thread(gate.wait)

    for _ in range(4_000 // 50):
        client.publish_many("q", ["x"] * 50)
    with running(make_worker(lmstfy_server, namespace, token, quick_then_blocked, queues="q", concurrency=4)):
        wait_until(lambda: len(handled) >= quick + 4, what="the quick jobs handled", timeout=60)
        time.sleep(0.5)  # the consumes in flight land
        in_hand = client.stats("q").reserved
        gate.set()
        wait_until(lambda: drained(client, "q"), what="all handled", timeout=60)
    assert 3 * 4 <= in_hand <= 4 + MAX_AUTO_PREFETCH
