"""The worker's ACKs ride on its consumes (lmstfy-py's `ack` parameter), against a real server:
a busy worker sends few separate batch ACKs, no ACK is lost when a consume carrying some fails,
and `ack_with_consume=False` sends them only by batch ACK, as before."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter

import pytest

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import AsyncClient, Client, Job, Unauthorized, Unavailable
from lmstfy_py.worker import Worker, acks
from lmstfy_py.worker.acks import AckBatcher
from tests.conftest import eventually, free_port
from tests.fixtures.push_endpoints import served_in_thread
from tests.worker.conftest import drained, running, wait_until
from tests.worker.test_worker import HoldingProxy

JOBS = 2_000


class CountingProxy(HoldingProxy):
    """A real TCP proxy to the server that counts the batch ACKs and the consumes carrying ACKs it
    passes on, and cuts the connection of the first `breaks` of those consumes before the server
    sees them (the worker's client then fails as when the server is away)."""

    def __init__(self, lmstfy_server: Server, breaks: int = 0) -> None:
        super().__init__(lmstfy_server, 0.0, b"-")
        self.breaks = breaks
        self.batch_acks = self.consumes = self.acking_consumes = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int | None) -> None:
        if number is None:  # the server's answers
            await super()._pipe(reader, writer, number)
            return
        try:
            with contextlib.suppress(ConnectionError):
                # One read is one request: a client sends its next only after the answer.
                while data := await reader.read(65536):
                    line = data.split(b"\r\n", 1)[0]
                    self.batch_acks += line.startswith(b"DELETE") and b"/jobs?" in line
                    self.consumes += line.startswith(b"GET")
                    if line.startswith(b"GET") and b"ack=" in line:
                        if self.breaks:
                            self.breaks -= 1
                            break  # the connection closes, the request unsent
                        self.acking_consumes += 1
                    writer.write(data)
                    await writer.drain()
        finally:
            writer.close()


def drain_through_proxy(
    lmstfy_server: Server, namespace: str, token: str, client: Client, proxy: CountingProxy, carry: bool = True
) -> Counter[str]:
    """JOBS jobs handled by a worker reaching the server through `proxy`: how often each was handled."""
    published = [job_id for _ in range(JOBS // 50) for job_id in client.publish_many("q", ["x"] * 50)]
    seen: Counter[str] = Counter()

    async def handle(job: Job) -> None:
        seen[job.id] += 1

    with served_in_thread(proxy.start, proxy.stop) as url:
        # ttr 60: an ACK lost would leave its job reserved far past the wait below.
        worker = Worker(
            handle,
            url=url,
            token=token,
            namespace=namespace,
            queues="q",
            concurrency=16,
            ttr=60,
            ack_with_consume=carry,
        )
        with running(worker):
            wait_until(lambda: len(seen) == JOBS and drained(client, "q"), timeout=30, what="all handled and ACKed")
    assert sorted(seen) == sorted(published)
    return seen


def test_a_busy_worker_acks_with_its_consumes(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    proxy = CountingProxy(lmstfy_server)
    seen = drain_through_proxy(lmstfy_server, namespace, token, client, proxy)
    assert set(seen.values()) == {1}  # none handled twice
    # Each consume carries what finished since the one before: separate batch ACKs are what came
    # at the end, or while every consume waited for room.
    assert proxy.acking_consumes >= JOBS // 100
    assert proxy.batch_acks < proxy.acking_consumes / 4, (proxy.batch_acks, proxy.acking_consumes)


def test_without_it_every_ack_is_a_batch_ack(lmstfy_server: Server, namespace: str, token: str, client: Client) -> None:
    proxy = CountingProxy(lmstfy_server)
    seen = drain_through_proxy(lmstfy_server, namespace, token, client, proxy, carry=False)
    assert set(seen.values()) == {1}
    assert proxy.acking_consumes == 0 and proxy.batch_acks >= JOBS // 100


def test_the_acks_of_a_failed_consume_are_sent_again(
    lmstfy_server: Server, namespace: str, token: str, client: Client
) -> None:
    proxy = CountingProxy(lmstfy_server, breaks=5)
    seen = drain_through_proxy(lmstfy_server, namespace, token, client, proxy)
    assert proxy.breaks == 0  # five consumes carrying ACKs failed
    assert set(seen.values()) == {1}  # and their jobs were ACKed all the same, long before their ttr


async def test_the_batcher_puts_back_what_a_failed_consume_carried(
    lmstfy_server: Server, namespace: str, token: str, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    job_ids = client.publish_many("q", ["a", "b", "c"])
    assert len(client.consume_many("q", 3, ttr=60)) == 3
    async with (
        AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as good,
        AsyncClient(f"http://127.0.0.1:{free_port()}", namespace, token, retries=0) as away,
        AsyncClient(lmstfy_server.data_url, namespace, "wrongtoken", retries=0) as refused,
    ):
        batcher = AckBatcher(good, carry=True)
        for job_id in job_ids:
            batcher.add("q", job_id)
        with pytest.raises(Unavailable):
            await batcher.consume(away, ["q"], 10, 60, 0)
        assert (batcher.waiting, batcher.sent) == (3, 0)  # back, in line
        assert await batcher.consume(good, ["q"], 10, 60, 0) == []
        assert (batcher.waiting, batcher.sent) == (0, 3)
        assert all(client.peek_job("q", job_id) is None for job_id in job_ids)

        batcher.add("q", "gone-1")
        with caplog.at_level(logging.ERROR, "lmstfy_py.worker"), pytest.raises(Unauthorized):
            await batcher.consume(refused, ["q"], 10, 60, 0)
        assert batcher.waiting == 0  # refused: sending it again would be refused again
        assert any("refused with a consume" in record.getMessage() for record in caplog.records)
        assert await AckBatcher(good).consume(good, ["q"], 10, 60, 0) == []  # carry off: a plain consume


async def test_once_the_queue_runs_dry_the_last_acks_do_not_wait_for_a_consume_to_carry_them(
    lmstfy_server: Server, namespace: str, token: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consume that came back short means the next ones long-poll: the ids finished after it go
    by batch ACK after the short linger, not the carry linger (made 30 s here, so that the test
    cannot pass by waiting it out). While consumes come back full, ids wait for one to carry them."""
    monkeypatch.setattr(acks, "CARRY_LINGER_S", 30.0)
    client.publish_many("q", ["x"] * 5)
    async with AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as consumer:
        batcher = AckBatcher(consumer, carry=True)
        rounds = asyncio.create_task(batcher.run())
        try:
            full = await batcher.consume(consumer, ["q"], 2, 60, 0)  # 2 of 2: the queue is not dry
            for job in full:
                batcher.add("q", job.id)
            await asyncio.sleep(0.5)
            assert batcher.waiting == 2  # kept for the next consume to carry
            short = await batcher.consume(consumer, ["q"], 10, 60, 0)  # carries those 2; 3 of 10
            assert len(short) == 3 and (batcher.waiting, batcher.sent) == (0, 2)
            for job in short:
                batcher.add("q", job.id)
            await eventually(lambda: batcher.sent == 5)
        finally:
            batcher.close()
            await rounds
    assert all(client.peek_job("q", job.id) is None for job in [*full, *short])


async def test_a_consume_coming_back_short_as_a_linger_ends_does_not_crash_the_worker(
    lmstfy_server: Server, namespace: str, token: str
) -> None:
    """The race a bench run found (1 worker run in 8 stopped on a RuntimeError): a linger's timeout
    has fired, its round's task not yet resumed, when a consume comes back short and cuts it."""
    async with AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as consumer:
        batcher = AckBatcher(consumer, carry=True)
        loop = asyncio.get_running_loop()

        async def lingering_round() -> None:
            async with asyncio.timeout(None) as linger:
                batcher._lingering = linger
                linger.reschedule(loop.time())  # ends at the next turn of the loop
                await asyncio.sleep(5)

        round_task = asyncio.create_task(lingering_round())
        while batcher._lingering is None or not batcher._lingering.expired():
            await asyncio.sleep(0)
        assert not round_task.done()  # fired, not yet left: the moment of the race
        assert await batcher.consume(consumer, ["q"], 10, 60, 0) == []  # short: cuts the linger
        with pytest.raises(TimeoutError):
            await round_task
