"""The load of benchmarks/bench_flow.py and of the flow-control limit tests (SPEC 14, issue 29), one code
for both: a namespace's API on one or more servers, consume / ACK / stats / bulk publish on raw keep-alive
connections (benchmarks/loadclient.py), and the runs that check max_reserved and rate against what many
concurrent consumers saw.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import bench
from benchmarks.harness.lmstfy_servers import Server, create_token
from benchmarks.loadclient import Answer, Connection

NS = "flow"
TTR = 60
BULK = 64  # the most jobs of one bulk publish

Address = tuple[str, int]


@dataclass(frozen=True)
class Api:
    """The namespace on one or more servers' data APIs (consumer n uses host n mod their number)."""

    hosts: tuple[Address, ...]
    admin: Address
    token: str

    @classmethod
    def of(cls, *servers: Server) -> Api:
        hosts = tuple(("127.0.0.1", server.port) for server in servers)
        return cls(hosts, ("127.0.0.1", servers[0].admin_port), create_token(servers[0], NS, "bench_flow"))

    def connect(self, number: int = 0) -> Connection:
        return Connection(*self.hosts[number % len(self.hosts)])

    def path(self, queue: str, *rest: str) -> str:
        return "/".join([f"/api/{NS}/{queue}", *rest])

    def params(self, **more: Any) -> dict[str, Any]:
        return {"token": self.token, **more}

    async def settings(self, queue: str, **values: Any) -> None:
        """Through the admin API (no token), as an operator sets them."""
        conn = Connection(*self.admin)
        try:
            bench.expect(await conn.request("PUT", f"/queues/{NS}/{queue}/settings", values), 200)
        finally:
            await conn.close()


# -- requests ------------------------------------------------------------------------------------


async def send(conn: Connection, rec: bench.Recorder | None, method: str, path: str, params: dict[str, Any]) -> Answer:
    return await (rec.timed(conn, method, path, params) if rec else conn.request(method, path, params))


async def consume(conn: Connection, api: Api, queue: str, rec: bench.Recorder | None = None) -> str | None:
    """One job's id (long-polling up to 1 s), or None when none came."""
    answer = await send(conn, rec, "GET", api.path(queue), api.params(ttr=TTR, timeout=1))
    return str(answer.json()["job_id"]) if bench.expect(answer, 200, 404).status == 200 else None


async def ack(conn: Connection, api: Api, queue: str, job_id: str, rec: bench.Recorder | None = None) -> None:
    bench.expect(await send(conn, rec, "DELETE", api.path(queue, "job", job_id), api.params()), 204)


async def stats(conn: Connection, api: Api, queue: str) -> dict[str, Any]:
    answer: dict[str, Any] = bench.expect(await conn.request("GET", api.path(queue, "stats"), api.params()), 200).json()
    return answer


async def publish_bulks(api: Api, queue: str, bulks: Iterable[tuple[str | None, int]], clients: int) -> None:
    """Publishes each (group or None, jobs) as one bulk over `clients` connections; the same data either way."""
    work = iter(bulks)

    async def fill(number: int) -> None:
        conn = api.connect(number)
        try:
            for group, jobs in work:
                params = api.params(group=group) if group else api.params()
                body = json.dumps([f"job-{n}" for n in range(jobs)]).encode()
                bench.expect(await conn.request("PUT", api.path(queue, "bulk"), params, body), 201)
        finally:
            await conn.close()

    await asyncio.gather(*(fill(number) for number in range(clients)))


def bulks_of(jobs: int, group: str | None = None) -> list[tuple[str | None, int]]:
    return [(group, min(BULK, jobs - start)) for start in range(0, jobs, BULK)]


async def run_all(work: list[Coroutine[Any, Any, None]], timeout: float) -> None:
    """Runs `work` to its end, raising the first error; what still runs at the timeout is cancelled. Each
    consumer ends by itself, its last long-poll answered: a consume dropped while it waits on the server
    would reserve a job for nobody (until its ttr), and the next run would miss it."""
    tasks = [asyncio.create_task(one) for one in work]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when="FIRST_EXCEPTION")
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- the limits, as the tests check them too ---------------------------------------------------------


@dataclass
class Capped:
    """What consumers of a queue with max_reserved saw."""

    delivered: int = 0
    ids: set[str] = field(default_factory=set, repr=False)  # distinct jobs delivered
    in_flight: int = 0
    most_in_flight: int = 0  # the consumers' own count
    most_reserved: int = 0  # the queue's stats' `reserved`, sampled
    samples: int = 0
    seconds: float = 0.0


async def capped_run(api: Api, queue: str, consumers: int, hold_s: float, seconds: float, jobs: float) -> Capped:
    """`consumers` consumers take, hold and ACK jobs until `jobs` distinct ones were ACKed or `seconds` passed."""
    got, finished = Capped(), asyncio.Event()
    started = time.monotonic()
    deadline = started + seconds

    async def consumer(number: int) -> None:
        conn = api.connect(number)
        try:
            while time.monotonic() < deadline and not finished.is_set():
                job_id = await consume(conn, api, queue)
                if job_id is None:
                    continue
                got.delivered += 1
                got.ids.add(job_id)
                got.in_flight += 1
                got.most_in_flight = max(got.most_in_flight, got.in_flight)
                await asyncio.sleep(hold_s)
                got.in_flight -= 1  # before the ACK is sent: the count stays within the reservation
                await ack(conn, api, queue, job_id)
                if len(got.ids) >= jobs:
                    finished.set()
        finally:
            await conn.close()

    async def sampler() -> None:
        conn = api.connect()
        try:
            while time.monotonic() < deadline and not finished.is_set():
                got.most_reserved = max(got.most_reserved, int((await stats(conn, api, queue))["reserved"]))
                got.samples += 1
                await asyncio.sleep(0.005)
        finally:
            await conn.close()

    await run_all([*(consumer(n) for n in range(consumers)), sampler()], seconds + 5)
    got.seconds = time.monotonic() - started
    return got


async def rated_run(api: Api, queue: str, consumers: int, seconds: float) -> tuple[float, list[float]]:
    """`consumers` consumers take and ACK jobs for `seconds`: when they started, and each delivery's time
    (the answer's arrival: never before the server reserved the job), in order."""
    times: list[float] = []
    started = time.monotonic()

    async def consumer(number: int) -> None:
        conn = api.connect(number)
        try:
            while time.monotonic() < started + seconds:
                job_id = await consume(conn, api, queue)
                if job_id is not None:
                    times.append(time.monotonic())
                    await ack(conn, api, queue, job_id)
        finally:
            await conn.close()

    await run_all([consumer(n) for n in range(consumers)], seconds + 5)
    return started, sorted(times)


def worst_excess(started: float, times: list[float], rate: float, burst: int) -> float:
    """The most that the deliveries by any time t went beyond burst + rate * (t - started): <= 0 when the
    bucket held (it holds at most `burst` tokens at `started`, whatever came before)."""
    return max((k - (burst + rate * (t - started)) for k, t in enumerate(times, 1)), default=-float(burst))
