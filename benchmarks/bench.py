#!/usr/bin/env python3
"""Load-test a RUNNING lmstfy-py server over loopback, next to ceilings measured in the same run.

Terminal 1: `python3 scripts/dev.py serve --workers 2`; terminal 2: `.venv/bin/python -m benchmarks.bench`.

Each scenario runs `--duration` seconds with `--clients` keep-alive connections (one per task,
benchmarks/loadclient.py: a client library's pool would serialize them) and prints one line:
requests/s, jobs/s, request latency p50/p99, and the CPU of the server (its process and every
descendant, i.e. all workers) and of its Redis, read from /proc over the scenario's window.
The bench creates a token in a fresh namespace (`bench-<time>`) and purges that namespace at
the end. Scenarios: publish, bulk, consume_ack, consume100, consume100_batch, pubsub, e2e, timers
(see docs/PERFORMANCE.md).

Ceilings, same machine, same run:
- `trivial`: benchmarks/trivial_app.py, a one-line JSON endpoint served by lmstfy_py.server's own
  serve loop and settings of `--http-server` (give the server's), uvloop and `--workers`, under
  the same keep-alive GET load.
- `trivial-put`: the same endpoint loaded with publish's own request (PUT, token in the query,
  the same 34-byte body) instead of a GET: a body costs the HTTP server work of its own, so
  `publish ÷ trivial-put` compares like with like.
- `trivial-redis`: the same endpoint making one EVALSHA round trip to the server's Redis per
  request, through the client lmstfy-py's engine makes script calls with (auto-pipelining on a
  standalone pool, store/pipelined.py): the ceiling of a route with one Redis call.
- `redis`: redis-benchmark against the server's Redis (EVALSHA of a publish-like script, LPUSH,
  RPOP, ZADD; -P 1, -c = clients). Needs redis-tools: `apt-get update && apt-get install -y
  redis-tools`; without it that ceiling prints "skipped".

The server's pid is found by the port it listens on (with workers, their common parent; or
--server-pid), its Redis as its redis-server/valkey-server child (or --redis-pid), the Redis
address as that process's listening socket (or --redis-socket / --redis-url).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from benchmarks.harness.ports import free_port
from benchmarks.loadclient import Answer, Connection

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ["publish", "bulk", "consume_ack", "consume100", "consume100_batch", "pubsub", "e2e", "timers"]
# lmstfy (Go) reference figures the issue compares against.
LMSTFY_REFERENCE = {"publish": 11_300.0, "consume_ack": 5_600.0, "pubsub": 3_400.0}
BULK = 64
PAYLOAD = b"bench-job-payload-0123456789abcdef"
TTR = 60
# Jobs prefilled per second of --duration: more than the scenario can take, within reason.
PREFILL_PER_S = {"consume_ack": 8_000, "consume100": 20_000, "consume100_batch": 40_000}
TIMER_DELAY_MS = (1000, 3000)
REDIS_KEY_PREFIX = "lmstfy-bench:{b}:"
EVAL_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'd', ARGV[1], 't', 1, 's', 'R')
redis.call('PEXPIRE', KEYS[1], 10000)
redis.call('SADD', 'lmstfy-bench:{b}:queues', 'q')
redis.call('LPUSH', 'lmstfy-bench:{b}:ready', KEYS[1])
if redis.call('LLEN', 'lmstfy-bench:{b}:wake') == 0 then redis.call('LPUSH', 'lmstfy-bench:{b}:wake', '1') end
return 1
"""
STOP_TIMEOUT = 10.0

Address = tuple[str, int]


# -- processes and CPU (/proc) -----------------------------------------------------------


def stat_fields(pid: int) -> list[str]:
    # The command name may hold spaces and parentheses: the fields start after the last ")".
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    try:
        fields = stat_fields(pid)
    except OSError:
        return 0.0  # gone: its CPU leaves the sum, which a window's delta then under-counts
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(stat_fields(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def descendants(root: int, parent_of: dict[int, int]) -> set[int]:
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parent_of.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            link = os.readlink(fd) if fd.exists() else ""
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    except OSError:
        pass
    return inodes


def listening_inodes(port: int) -> set[int]:
    """Inodes of the TCP sockets listening on `port` (/proc/net/tcp and tcp6, state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(cols[9]))
    return found


def server_pid_by_port(port: int) -> int:
    """The process listening on `port` whose parent does not; with workers, their supervisor."""
    inodes = listening_inodes(port)
    parent_of = parents()
    holders = {pid for pid in parent_of if socket_inodes(pid) & inodes}
    roots = {pid for pid in holders if parent_of[pid] not in holders}
    # On Linux each worker listens on a socket of its own and the supervisor on none (listeners.py).
    supervisors = {parent_of[pid] for pid in roots}
    if len(roots) > 1 and len(supervisors) == 1:
        roots = supervisors
    if len(roots) != 1:
        found = sorted(holders)
        raise SystemExit(f"bench: cannot tell the server process on port {port} (found {found}); give --server-pid")
    return roots.pop()


def redis_child(server_pid: int, parent_of: dict[int, int]) -> int | None:
    for pid in sorted(descendants(server_pid, parent_of) - {server_pid}):
        if comm(pid) in ("redis-server", "valkey-server"):
            return pid
    return None


def unix_listening_path(pid: int) -> str | None:
    """The unix socket path a process listens on (/proc/net/unix, state 01 = listening)."""
    inodes = socket_inodes(pid)
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 8 and cols[5] == "01" and int(cols[6]) in inodes:
            return cols[7]
    return None


def tcp_listening_port(pid: int) -> int | None:
    inodes = socket_inodes(pid)
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        if cols[3] == "0A" and int(cols[9]) in inodes:
            return int(cols[1].rsplit(":", 1)[1], 16)
    return None


@dataclass
class Processes:
    """The server's process tree and its Redis; `snapshot()` is their CPU seconds so far."""

    server: int
    redis: int | None

    def groups(self) -> tuple[set[int], set[int]]:
        parent_of = parents()
        redis_tree = descendants(self.redis, parent_of) if self.redis else set()
        return descendants(self.server, parent_of) - redis_tree, redis_tree

    def snapshot(self) -> tuple[float, float]:
        # Re-read the tree each time: a worker restarted meanwhile still counts.
        server, redis = self.groups()
        return sum(map(cpu_seconds, server)), sum(map(cpu_seconds, redis)) if self.redis else math.nan


# -- Redis side: address, command stats, redis-benchmark ---------------------------------


@dataclass
class RedisTarget:
    socket: str | None = None
    url: str | None = None

    def client(self) -> Any:
        import redis

        if self.socket:
            return redis.Redis(unix_socket_path=self.socket)
        return redis.Redis.from_url(self.url or "redis://127.0.0.1:6379/0")

    def benchmark_args(self) -> list[str]:
        return ["-s", self.socket] if self.socket else ["-u", self.url or "redis://127.0.0.1:6379/0"]

    def describe(self) -> str:
        return f"unix:{self.socket}" if self.socket else str(self.url)

    def url_of(self) -> str:
        return f"unix://{self.socket}" if self.socket else self.url or "redis://127.0.0.1:6379/0"


def find_redis_target(args: argparse.Namespace, redis_pid: int | None) -> RedisTarget | None:
    if args.redis_socket or args.redis_url:
        return RedisTarget(args.redis_socket, args.redis_url)
    if redis_pid is None:
        return None
    path = unix_listening_path(redis_pid)
    if path:
        return RedisTarget(socket=path)
    port = tcp_listening_port(redis_pid)
    return RedisTarget(url=f"redis://127.0.0.1:{port}/0") if port else None


def scripts_run(client: Any) -> int:
    """Lua script calls Redis has run so far (FCALL, EVALSHA, EVAL and their _RO forms)."""
    stats = client.info("commandstats")
    lua = ("fcall", "fcall_ro", "evalsha", "eval", "evalsha_ro")
    return sum(int(v["calls"]) for k, v in stats.items() if k.split("_", 1)[1] in lua)


def redis_benchmark(target: RedisTarget, clients: int, seconds: float) -> dict[str, float] | None:
    """ops/s of the commands lmstfy-py relies on, through redis-benchmark; None when it is missing."""
    if not shutil.which("redis-benchmark"):
        return None
    client = target.client()
    sha = client.script_load(EVAL_SCRIPT)
    p = REDIS_KEY_PREFIX
    commands = {
        "evalsha": ["EVALSHA", sha, "1", f"{p}job:__rand_int__", PAYLOAD.decode()],
        "lpush": ["LPUSH", f"{p}list", PAYLOAD.decode()],
        "rpop": ["RPOP", f"{p}list"],  # after LPUSH: the list holds more than RPOP takes
        "zadd": ["ZADD", f"{p}zset", "__rand_int__", "member:__rand_int__"],
    }
    try:
        return {name: run_redis_benchmark(target, clients, seconds, cmd) for name, cmd in commands.items()}
    finally:
        cleanup_redis(client)


def run_redis_benchmark(target: RedisTarget, clients: int, seconds: float, command: list[str]) -> float:
    # redis-benchmark counts requests, not time: a short probe sizes the real run.
    probe = redis_benchmark_rps(target, clients, 5_000, command)
    return redis_benchmark_rps(target, clients, max(5_000, int(probe * seconds)), command)


def redis_benchmark_rps(target: RedisTarget, clients: int, requests: int, command: list[str]) -> float:
    argv = ["redis-benchmark", *target.benchmark_args(), "-c", str(clients), "-n", str(requests)]
    argv += ["-P", "1", "-r", "100000000", "--csv", *command]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    row = [line for line in out.splitlines() if line.startswith('"') and not line.startswith('"test"')][-1]
    return float(row.split(",")[1].strip('"'))


def cleanup_redis(client: Any) -> None:
    for key in client.scan_iter(match="lmstfy-bench:*", count=1000):
        client.unlink(key)


# -- measuring a load window -------------------------------------------------------------


@dataclass
class Recorder:
    """Counts what completes before the window ends; latencies in seconds."""

    deadline: float
    requests: int = 0
    jobs: int = 0
    latencies: list[float] = field(default_factory=list)

    async def timed(
        self,
        conn: Connection,
        method: str,
        path: str,
        params: dict[str, Any],
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        start = time.perf_counter()
        answer = await conn.request(method, path, params, body, headers)
        end = time.perf_counter()
        if end <= self.deadline:
            self.requests += 1
            self.latencies.append(end - start)
        return answer

    def done(self, jobs: int = 1) -> None:
        if time.perf_counter() <= self.deadline:
            self.jobs += jobs

    @property
    def open(self) -> bool:
        return time.perf_counter() < self.deadline


@dataclass
class Result:
    name: str
    seconds: float
    requests: int
    jobs: int
    p50_ms: float
    p99_ms: float
    server_cpu_pct: float | None
    redis_cpu_pct: float | None
    client_cpu_pct: float
    other_cpu_pct: float
    redis_scripts_per_s: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)

    @property
    def req_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Meter:
    """What a window is measured with: the server's processes and its Redis's command stats."""

    procs: Processes | None
    redis: Any | None

    def snapshot(self) -> tuple[float, tuple[float, float] | None, float, int | None, float]:
        scripts = scripts_run(self.redis) if self.redis is not None else None
        cpu = self.procs.snapshot() if self.procs else None
        return time.perf_counter(), cpu, time.process_time(), scripts, machine_busy_seconds()


Worker = Callable[[Recorder], Coroutine[Any, Any, None]]


async def measure(name: str, meter: Meter, workers: list[Worker], duration: float) -> Result:
    """Run `workers` until the deadline (or until all are done), measured over that window."""
    start = meter.snapshot()
    recorder = Recorder(start[0] + duration)
    tasks = [asyncio.create_task(w(recorder)) for w in workers]
    await asyncio.wait(tasks, timeout=duration)
    end = meter.snapshot()
    recorder.deadline = min(recorder.deadline, end[0])  # all done early: the window ends now
    _, pending = await asyncio.wait(tasks, timeout=STOP_TIMEOUT)
    for task in pending:
        task.cancel()
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception():
            raise task.exception()  # type: ignore[misc]
    return result_of(name, recorder, start, end)


def result_of(name: str, rec: Recorder, start: tuple[Any, ...], end: tuple[Any, ...]) -> Result:
    seconds = end[0] - start[0]
    server_cpu = redis_cpu = scripts = None
    if start[1] is not None:
        server_cpu = 100 * (end[1][0] - start[1][0]) / seconds
        redis_cpu = None if math.isnan(start[1][1]) else 100 * (end[1][1] - start[1][1]) / seconds
    if start[3] is not None:
        scripts = (end[3] - start[3]) / seconds
    client_cpu = 100 * (end[2] - start[2]) / seconds
    # Whatever else ran on the machine meanwhile: high values mean the figures are noisy.
    other_cpu = 100 * (end[4] - start[4]) / seconds - (server_cpu or 0) - (redis_cpu or 0) - client_cpu
    return Result(
        name,
        seconds,
        rec.requests,
        rec.jobs,
        1000 * percentile(rec.latencies, 0.5),
        1000 * percentile(rec.latencies, 0.99),
        server_cpu,
        redis_cpu,
        client_cpu,
        max(0.0, other_cpu),
        scripts,
    )


# -- the scenarios -----------------------------------------------------------------------


@dataclass
class Target:
    data: Address
    ns: str
    token: str
    clients: int
    duration: float
    ack_conns: int
    query: dict[str, str] = field(default_factory=dict)  # more parameters on every request (--query)
    e2e_rate: float = 0.0  # e2e's publishes a second in all, 0: as fast as they go (--e2e-rate)

    def path(self, queue: str, *rest: str) -> str:
        return "/".join([f"/api/{self.ns}/{queue}", *rest])

    def params(self, **more: Any) -> dict[str, Any]:
        return {"token": self.token, **self.query, **more}

    def connect(self) -> Connection:
        return Connection(*self.data)


def bulk_body(start: int = 0) -> bytes:
    return json.dumps([f"job-{start + i}" for i in range(BULK)]).encode()


def expect(answer: Answer, *statuses: int) -> Answer:
    if answer.status not in statuses:
        raise RuntimeError(f"unexpected answer {answer.status}: {answer.body[:200]!r}")
    return answer


def publisher(t: Target, queue: str) -> Worker:
    async def run(rec: Recorder) -> None:
        conn = t.connect()
        while rec.open:
            expect(await rec.timed(conn, "PUT", t.path(queue), t.params(), PAYLOAD), 201)
            rec.done()
        await conn.close()

    return run


def bulk_publisher(t: Target, queue: str) -> Worker:
    body = bulk_body()

    async def run(rec: Recorder) -> None:
        conn = t.connect()
        while rec.open:
            expect(await rec.timed(conn, "PUT", t.path(queue, "bulk"), t.params(), body), 201)
            rec.done(BULK)
        await conn.close()

    return run


async def prefill(t: Target, queue: str, jobs: int) -> float:
    """Publish `jobs` jobs (bulk, all clients); the seconds it took."""
    batches = iter(range(jobs // BULK + 1))
    started = time.perf_counter()

    async def fill() -> None:
        conn = t.connect()
        for _ in batches:
            expect(await conn.request("PUT", t.path(queue, "bulk"), t.params(), bulk_body()), 201)
        await conn.close()

    await asyncio.gather(*(fill() for _ in range(t.clients)))
    return time.perf_counter() - started


def consumer(t: Target, queue: str, timeout: int = 0) -> Worker:
    """count=1 consume + ACK; with timeout=0 it stops when the queue is empty."""

    async def run(rec: Recorder) -> None:
        conn = t.connect()
        while rec.open:
            answer = await rec.timed(conn, "GET", t.path(queue), t.params(ttr=TTR, timeout=timeout))
            if expect(answer, 200, 404).status == 404:
                if timeout == 0:
                    break
                continue
            job_id = answer.json()["job_id"]
            expect(await rec.timed(conn, "DELETE", t.path(queue, "job", job_id), t.params()), 204)
            rec.done()
        await conn.close()

    return run


def batch_consumer(t: Target, queue: str) -> Worker:
    """count=100 consume, then ACK every job over `ack_conns` connections at once."""

    async def run(rec: Recorder) -> None:
        conn = t.connect()
        ackers = [t.connect() for _ in range(t.ack_conns)]
        while rec.open:
            answer = await rec.timed(conn, "GET", t.path(queue), t.params(ttr=TTR, count=100))
            if expect(answer, 200, 404).status == 404:
                break
            ids = [job["job_id"] for job in answer.json()]
            await asyncio.gather(*(ack_all(t, rec, a, queue, ids[i :: len(ackers)]) for i, a in enumerate(ackers)))
        for c in [conn, *ackers]:
            await c.close()

    return run


def batch_acker(t: Target, queue: str) -> Worker:
    """count=100 consume, then one batch ACK of every job (DELETE .../jobs) on the same connection."""

    async def run(rec: Recorder) -> None:
        conn = t.connect()
        while rec.open:
            answer = await rec.timed(conn, "GET", t.path(queue), t.params(ttr=TTR, count=100))
            if expect(answer, 200, 404).status == 404:
                break
            jobs = answer.json()
            ids = ",".join(job["job_id"] for job in jobs)
            expect(await rec.timed(conn, "DELETE", t.path(queue, "jobs"), t.params(job_id=ids)), 204)
            rec.done(len(jobs))
        await conn.close()

    return run


async def ack_all(t: Target, rec: Recorder, conn: Connection, queue: str, ids: list[str]) -> None:
    for job_id in ids:
        expect(await rec.timed(conn, "DELETE", t.path(queue, "job", job_id), t.params()), 204)
        rec.done()


async def run_publish(t: Target, meter: Meter) -> Result:
    return await measure("publish", meter, [publisher(t, "publish") for _ in range(t.clients)], t.duration)


async def run_bulk(t: Target, meter: Meter) -> Result:
    return await measure("bulk", meter, [bulk_publisher(t, "bulk") for _ in range(t.clients)], t.duration)


async def run_consume_ack(t: Target, meter: Meter) -> Result:
    filled = await prefill(t, "consume_ack", int(PREFILL_PER_S["consume_ack"] * t.duration))
    result = await measure("consume_ack", meter, [consumer(t, "consume_ack") for _ in range(t.clients)], t.duration)
    result.extra["prefill_s"] = filled
    return result


async def run_consume100(t: Target, meter: Meter) -> Result:
    filled = await prefill(t, "consume100", int(PREFILL_PER_S["consume100"] * t.duration))
    result = await measure("consume100", meter, [batch_consumer(t, "consume100") for _ in range(t.clients)], t.duration)
    result.extra["prefill_s"] = filled
    return result


async def run_consume100_batch(t: Target, meter: Meter) -> Result:
    name = "consume100_batch"
    filled = await prefill(t, name, int(PREFILL_PER_S[name] * t.duration))
    result = await measure(name, meter, [batch_acker(t, name) for _ in range(t.clients)], t.duration)
    result.extra["prefill_s"] = filled
    return result


def counting_publisher(t: Target, queue: str, published: Recorder, interval: float = 0.0) -> Worker:
    """Publishes until the window ends, counting into `published`; `interval` s apart at most (0: flat out)."""

    async def run(rec: Recorder) -> None:
        conn = t.connect()
        start, sent = time.perf_counter(), 0
        while rec.open:
            expect(await rec.timed(conn, "PUT", t.path(queue), t.params(), PAYLOAD), 201)
            sent += 1
            if rec.open:
                published.jobs += 1
            if interval and (ahead := start + sent * interval - time.perf_counter()) > 0:
                await asyncio.sleep(ahead)
        await conn.close()

    return run


async def run_pubsub(t: Target, meter: Meter) -> Result:
    """Half the clients publish, half long-poll and ACK; jobs = jobs ACKed (end to end)."""
    half = max(1, t.clients // 2)
    published = Recorder(0.0)  # counts publishes separately from the end-to-end jobs
    workers = [counting_publisher(t, "pubsub", published) for _ in range(half)]
    workers += [consumer(t, "pubsub", 1) for _ in range(half)]
    result = await measure("pubsub", meter, workers, t.duration)
    result.extra["published_per_s"] = published.jobs / result.seconds
    return result


async def run_e2e(t: Target, meter: Meter) -> Result:
    """The issue's e2e shape: a quarter of the clients publish, every client long-polls and ACKs.

    At 32 clients, 8 producers and 32 consumers: the consumers outnumber the jobs, so most of them
    wait in a long poll and are woken for a job, as a queue with idle workers runs. jobs = jobs
    ACKed; compare CPU per job (`cpu_us_job`), not per request: a consume that times out empty
    is a request that ends no job. With `--e2e-rate`, the producers publish that many jobs a
    second in all: a server's CPU per job depends on its load (fewer requests share each system
    call and Redis round trip when more come at once), so two servers compare best at one rate.
    """
    published = Recorder(0.0)
    producers = max(1, t.clients // 4)
    interval = producers / t.e2e_rate if t.e2e_rate else 0.0  # each producer's, between publishes
    workers = [counting_publisher(t, "e2e", published, interval) for _ in range(producers)]
    workers += [consumer(t, "e2e", 1) for _ in range(t.clients)]
    result = await measure("e2e", meter, workers, t.duration)
    result.extra["published_per_s"] = published.jobs / result.seconds
    return result


async def run_timers(t: Target, meter: Meter, jobs: int) -> Result:
    """Jobs due in 1-3 s, consumers already waiting; lateness = elapsed_ms at delivery - delay."""
    delays: dict[str, int] = {}
    lateness: list[float] = []
    half = max(1, t.clients // 2)
    todo = iter(range(jobs))

    def timer_publisher() -> Worker:
        async def run(rec: Recorder) -> None:
            conn = t.connect()
            for _ in todo:
                delay = random.randint(*TIMER_DELAY_MS)
                answer = await rec.timed(conn, "PUT", t.path("timers"), t.params(delay_ms=delay), PAYLOAD)
                delays[expect(answer, 201).json()["job_id"]] = delay
            await conn.close()

        return run

    def timer_consumer() -> Worker:
        async def run(rec: Recorder) -> None:
            conn = t.connect()
            while len(lateness) < jobs and rec.open:
                answer = await rec.timed(conn, "GET", t.path("timers"), t.params(ttr=TTR, timeout=1))
                if expect(answer, 200, 404).status == 404:
                    continue
                job = answer.json()
                lateness.append(job["elapsed_ms"] - delays[job["job_id"]])
                expect(await rec.timed(conn, "DELETE", t.path("timers", "job", job["job_id"]), t.params()), 204)
                rec.done()
            await conn.close()

        return run

    window = TIMER_DELAY_MS[1] / 1000 + 2 + jobs / 1000  # the last due job plus publishing time
    workers = [timer_consumer() for _ in range(half)] + [timer_publisher() for _ in range(half)]
    result = await measure("timers", meter, workers, window)
    result.extra |= {
        "jobs": len(lateness),
        "late_p50_ms": percentile(lateness, 0.5),
        "late_p99_ms": percentile(lateness, 0.99),
        "late_max_ms": max(lateness, default=0.0),
        "early": sum(1 for late in lateness if late < 0),
    }
    return result


# -- the trivial-endpoint ceiling --------------------------------------------------------


async def run_trivial(
    args: argparse.Namespace, workers: int, app: str, redis_url: str = "", method: str = "GET", body: bytes = b""
) -> Result:
    port = free_port()
    argv = [sys.executable, "-m", "benchmarks.trivial_app", "--port", str(port), "--app", app]
    argv += ["--redis-url", redis_url] if redis_url else []
    argv += ["--http-server", args.http_server]
    proc = subprocess.Popen(
        [*argv, "--workers", str(workers)], cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        await wait_listening(("127.0.0.1", port), proc)
        await asyncio.sleep(0.5)  # every worker up, not just the first
        meter = Meter(Processes(proc.pid, None), None)
        t = Target(("127.0.0.1", port), "x", "x", args.clients, args.duration, 0)
        name = f"trivial-{app}" + ("" if method == "GET" else f"-{method.lower()}")
        loaders = [trivial_loader(t, method, body) for _ in range(args.clients)]
        return await measure(name, meter, loaders, t.duration)
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_listening(address: Address, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"trivial_app exited with {proc.returncode}")
        try:
            conn = Connection(*address)
            await conn.request("GET", "/")
            await conn.close()
            return
        except (OSError, ConnectionError):
            await asyncio.sleep(0.05)
    raise RuntimeError("trivial_app did not start within 15 s")


def trivial_loader(t: Target, method: str, body: bytes) -> Worker:
    async def run(rec: Recorder) -> None:
        conn = t.connect()
        while rec.open:
            expect(await rec.timed(conn, method, "/api/x/q", {"token": "x"}, body), 200)
            rec.done()
        await conn.close()

    return run


# -- reporting ---------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}{unit}" if value >= 100 else f"{value:.1f}{unit}"


def line_of(r: Result) -> str:
    text = (
        f"{r.name:<16} req/s {fmt(r.req_per_s):>8}  jobs/s {fmt(r.jobs_per_s):>8}  "
        f"p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms  "
        f"cpu server {fmt(r.server_cpu_pct, '%')} redis {fmt(r.redis_cpu_pct, '%')} "
        f"bench {fmt(r.client_cpu_pct, '%')} other {fmt(r.other_cpu_pct, '%')}"
    )
    if r.redis_scripts_per_s is not None:
        text += f"  lua/s {fmt(r.redis_scripts_per_s)}"
    if r.extra:
        text += "  " + " ".join(f"{k} {fmt(v)}" for k, v in r.extra.items())
    if r.ratios:
        text += "  |  " + " ".join(f"{k} {v:.2f}" for k, v in r.ratios.items())
    return text


def add_ratios(
    results: list[Result],
    trivial: Result | None,
    trivial_redis: Result | None,
    redis_ops: dict[str, float] | None,
    trivial_put: Result | None = None,
) -> None:
    for r in results:
        if trivial and trivial.req_per_s:
            r.ratios["req/trivial"] = r.req_per_s / trivial.req_per_s
        if r.name == "publish" and trivial_put and trivial_put.req_per_s:
            r.ratios["req/trivial-put"] = r.req_per_s / trivial_put.req_per_s
        if trivial_redis and trivial_redis.req_per_s:
            r.ratios["req/trivial+redis"] = r.req_per_s / trivial_redis.req_per_s
        if r.name in LMSTFY_REFERENCE:
            r.ratios["jobs/lmstfy"] = r.jobs_per_s / LMSTFY_REFERENCE[r.name]
        if redis_ops and r.redis_scripts_per_s is not None:
            r.ratios["lua/evalsha"] = r.redis_scripts_per_s / redis_ops["evalsha"]


def machine() -> dict[str, Any]:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(), "date": time.strftime("%F %T")}


# -- main --------------------------------------------------------------------------------


def address_of(url: str) -> Address:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"bench: loopback only, not {host}")
    return host, parts.port or 80


def create_token(admin: str, ns: str) -> str:
    answer = httpx.post(f"{admin}/token/{ns}", params={"description": "bench"}, timeout=10)
    answer.raise_for_status()
    return str(answer.json()["token"])


def put_queue_settings(admin: str, ns: str, queue: str, settings: dict[str, str]) -> None:
    """The settings of the scenario's queue (named as the scenario), through the admin twin: no token."""
    httpx.put(f"{admin}/queues/{ns}/{queue}/settings", params=settings, timeout=10).raise_for_status()


def purge(admin: str, ns: str) -> None:
    httpx.delete(f"{admin}/namespaces/{ns}", params={"purge": "true"}, timeout=120)


def find_processes(args: argparse.Namespace, port: int) -> Processes | None:
    try:
        server = args.server_pid or server_pid_by_port(port)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return None
    return Processes(server, args.redis_pid or redis_child(server, parents()))


async def run_scenarios(args: argparse.Namespace, base: Target, meter: Meter) -> list[Result]:
    runners: dict[str, Callable[[Target], Awaitable[Result]]] = {
        "publish": lambda t: run_publish(t, meter),
        "bulk": lambda t: run_bulk(t, meter),
        "consume_ack": lambda t: run_consume_ack(t, meter),
        "consume100": lambda t: run_consume100(t, meter),
        "consume100_batch": lambda t: run_consume100_batch(t, meter),
        "pubsub": lambda t: run_pubsub(t, meter),
        "e2e": lambda t: run_e2e(t, meter),
        "timers": lambda t: run_timers(t, meter, args.timer_jobs),
    }
    admin, stamp = args.admin.rstrip("/"), int(time.time() * 1000)
    results = []
    for name in args.scenarios:
        # A fresh namespace each, purged after: no scenario runs beside another's leftovers.
        ns = f"bench-{stamp}-{name.replace('_', '-')}"
        try:
            token = create_token(admin, ns)
            if args.queue_settings:  # e.g. events=100000: what recording costs (SPEC 13)
                put_queue_settings(admin, ns, name, args.queue_settings)
            result = await runners[name](replace(base, ns=ns, token=token))
        finally:
            purge(admin, ns)
        print(line_of(result), flush=True)
        # Purging 100k+ jobs leaves Redis work behind (an AOF rewrite): not the next scenario's cost.
        await asyncio.sleep(args.settle)
        results.append(result)
    return results


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = address_of(args.url)
    procs = find_processes(args, data[1])
    redis_target = find_redis_target(args, procs.redis if procs else None)
    print(f"bench: server pids {procs}, redis {redis_target.describe() if redis_target else 'unknown'}", flush=True)
    print(f"bench: {machine()}", flush=True)
    meter = Meter(procs, redis_target.client() if redis_target else None)
    base = Target(data, "", "", args.clients, args.duration, args.ack_conns, dict(args.query), args.e2e_rate)
    results = await run_scenarios(args, base, meter)
    return await ceilings(args, results, redis_target)


async def ceilings(args: argparse.Namespace, results: list[Result], redis_target: RedisTarget | None) -> dict[str, Any]:
    trivial = None
    if "trivial" in args.ceilings:
        url = redis_target.url_of() if redis_target and args.trivial_app.startswith("redis") else ""
        trivial = await run_trivial(args, args.workers, args.trivial_app, url)
        print(line_of(trivial), flush=True)
    trivial_put = None
    if "trivial-put" in args.ceilings:
        trivial_put = await run_trivial(args, args.workers, "raw", "", "PUT", PAYLOAD)
        print(line_of(trivial_put), flush=True)
    trivial_redis = None
    if "trivial-redis" in args.ceilings and redis_target:
        trivial_redis = await run_trivial(args, args.workers, "redis", redis_target.url_of())
        print(line_of(trivial_redis), flush=True)
    redis_ops = None
    if "redis" in args.ceilings:
        redis_ops = redis_benchmark(redis_target, args.clients, min(args.duration / 2, 3)) if redis_target else None
        shown = " ".join(f"{k} {v:,.0f}/s" for k, v in redis_ops.items()) if redis_ops else "skipped"
        print(f"{'redis-benchmark':<16} -P 1 -c {args.clients}: {shown}", flush=True)
    add_ratios(results, trivial, trivial_redis, redis_ops, trivial_put)
    print("ratios:", flush=True)
    for r in results:
        print("  " + f"{r.name:<17}" + " ".join(f"{k} {v:.2f}" for k, v in r.ratios.items()), flush=True)
    return {
        "machine": machine(),
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "results": [asdict(r) | {"req_per_s": r.req_per_s, "jobs_per_s": r.jobs_per_s} for r in results],
        "trivial": asdict(trivial) | {"req_per_s": trivial.req_per_s} if trivial else None,
        "trivial_put": asdict(trivial_put) | {"req_per_s": trivial_put.req_per_s} if trivial_put else None,
        "trivial_redis": asdict(trivial_redis) | {"req_per_s": trivial_redis.req_per_s} if trivial_redis else None,
        "redis_benchmark": redis_ops,
        "lmstfy_reference": LMSTFY_REFERENCE,
    }


def markdown(report: dict[str, Any]) -> str:
    """The results as the Markdown table of docs/PERFORMANCE.md (from a --json report too)."""
    rows = [
        "| scenario | req/s | jobs/s | p50 ms | p99 ms | CPU server | CPU Redis | CPU other | "
        "req/s ÷ trivial | req/s ÷ trivial+redis | jobs/s ÷ lmstfy | Lua/s ÷ EVALSHA |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["results"]:
        ratios = r["ratios"]
        cells = [r["name"], fmt(r["req_per_s"]), fmt(r["jobs_per_s"]), f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}"]
        cells += [fmt(r["server_cpu_pct"], "%"), fmt(r["redis_cpu_pct"], "%"), fmt(r["other_cpu_pct"], "%")]
        named = ("req/trivial", "req/trivial+redis", "jobs/lmstfy", "lua/evalsha")
        cells += [f"{ratios[k]:.2f}" if k in ratios else "" for k in named]
        rows.append("| " + " | ".join(cells) + " |")
    for r in report["results"]:
        if "late_p50_ms" in r["extra"]:
            e = r["extra"]
            rows += ["", f"Timer lateness ({e['jobs']:.0f} jobs due in 1-3 s): p50 {e['late_p50_ms']:.0f} ms, "]
            rows[-1] += f"p99 {e['late_p99_ms']:.0f} ms, max {e['late_max_ms']:.0f} ms, early {e['early']:.0f}."
    for r in report["results"]:
        if "req/trivial-put" in r["ratios"]:
            rows += ["", f"{r['name']} ÷ trivial-put (the same PUT request): {r['ratios']['req/trivial-put']:.2f}."]
    return "\n".join(rows + ceiling_rows(report))


def ceiling_rows(report: dict[str, Any]) -> list[str]:
    ops = report["redis_benchmark"]
    rows = [""]
    for trivial in (report["trivial"], report.get("trivial_put"), report.get("trivial_redis")):
        if trivial:
            rows.append(
                f"Ceiling: {trivial['name']} {fmt(trivial['req_per_s'])} req/s (p50 {trivial['p50_ms']:.1f} ms, "
                f"CPU {fmt(trivial['server_cpu_pct'], '%')});"
            )
    shown = ", ".join(f"{k.upper()} {v:,.0f}/s" for k, v in ops.items()) if ops else "skipped"
    rows.append(f"redis-benchmark -P 1 -c {report['settings']['clients']}: {shown}.")
    return rows


# -- --compare (and ab.py): the same scenarios against two servers, alternated round by round ------


@dataclass
class Side:
    """One server of a comparison, and the (req/s, jobs/s) of each of its rounds by scenario."""

    name: str
    url: str
    admin: str
    query: dict[str, str] = field(default_factory=dict)
    queue_settings: dict[str, str] = field(default_factory=dict)  # --queue-settings of its rounds
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # Server + Redis CPU µs per request of each round, where both processes were found.
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    cpu_us_job: dict[str, list[float]] = field(default_factory=dict)  # the same per job ended


async def alternate(sides: tuple[Side, Side], args: argparse.Namespace, rounds: int, label: str) -> None:
    """Runs args' scenarios on each side in turns, who goes first alternating: both see the same noise."""
    for round_ in range(rounds):
        for side in sides if round_ % 2 == 0 else sides[::-1]:
            more = f"{side.query or ''} {side.queue_settings or ''}"
            print(f"{label}: round {round_ + 1}/{rounds}, {side.name} ({side.url} {more})", flush=True)
            # No ceilings: a comparison's ratio is between the two servers.
            one = {**vars(args), "url": side.url, "admin": side.admin, "query": side.query, "ceilings": []}
            one["queue_settings"] = side.queue_settings
            report = await run(argparse.Namespace(**one))
            for result in report["results"]:
                side.rates.setdefault(result["name"], []).append((result["req_per_s"], result["jobs_per_s"]))
                cpu_pct = [result["server_cpu_pct"], result["redis_cpu_pct"]]
                if None not in cpu_pct and result["req_per_s"]:
                    side.cpu_us.setdefault(result["name"], []).append(1e4 * sum(cpu_pct) / result["req_per_s"])
                if None not in cpu_pct and result["jobs_per_s"]:
                    side.cpu_us_job.setdefault(result["name"], []).append(1e4 * sum(cpu_pct) / result["jobs_per_s"])


def ratio_table(top: Side, bottom: Side, first: Side) -> list[str]:
    """Medians of each side (first listed first), and top/bottom for req/s and jobs/s."""
    second = bottom if first is top else top
    ratio = f"{top.name}/{bottom.name}"
    width = max(len(ratio), 5) + 2
    head = f"{'scenario':<18}{first.name + ' req/s':>14}{second.name + ' req/s':>14}{ratio:>{width}}"
    head += f"{first.name + ' jobs/s':>15}{second.name + ' jobs/s':>15}{ratio:>{width}}"
    lines = [head + f"{first.name + ' CPU µs/req':>18}{second.name + ' CPU µs/req':>18}{ratio:>{width}}"]
    for name in first.rates:
        if name not in second.rates:
            continue
        req = {side.name: statistics.median(r for r, _ in side.rates[name]) for side in (first, second)}
        jobs = {side.name: statistics.median(j for _, j in side.rates[name]) for side in (first, second)}
        line = (
            f"{name:<18}{req[first.name]:>14,.0f}{req[second.name]:>14,.0f}"
            f"{req[top.name] / req[bottom.name]:>{width}.3f}"
            f"{jobs[first.name]:>15,.0f}{jobs[second.name]:>15,.0f}{jobs[top.name] / jobs[bottom.name]:>{width}.3f}"
        )
        if name in first.cpu_us and name in second.cpu_us:  # server + Redis, of this machine's processes
            cpu = {side.name: statistics.median(side.cpu_us[name]) for side in (first, second)}
            line += f"{cpu[first.name]:>18,.0f}{cpu[second.name]:>18,.0f}{cpu[top.name] / cpu[bottom.name]:>{width}.3f}"
        lines.append(line)
    return lines + paired_rows(top, bottom, ratio)


def paired_rows(top: Side, bottom: Side, ratio: str) -> list[str]:
    """Each round's own top/bottom, and their median: where the machine's speed drifts during a run
    (other tenants), the two sides of one round saw the same speed, while the medians of each side
    above may come from rounds apart."""
    lines = [f"paired, each round's {ratio} and their median:"]
    for name, top_rates in top.rates.items():
        pairs = list(zip(top_rates, bottom.rates.get(name, []), strict=False))
        if not pairs:
            continue
        req = [t[0] / b[0] for t, b in pairs if b[0]]
        line = f"  {name:<16} req/s {_listed(req)}"
        cpu_pairs = list(zip(top.cpu_us.get(name, []), bottom.cpu_us.get(name, []), strict=False))
        if cpu_pairs:
            line += f"; CPU µs/req {_listed([t / b for t, b in cpu_pairs if b])}"
        job_pairs = list(zip(top.cpu_us_job.get(name, []), bottom.cpu_us_job.get(name, []), strict=False))
        if job_pairs and any(abs(r - j) > 0.01 * r for r, j in top_rates):  # a scenario whose requests are not its jobs
            top_us, bottom_us = (statistics.median(side) for side in zip(*job_pairs, strict=True))
            line += f"; CPU µs/job ({top_us:,.0f} / {bottom_us:,.0f}) {_listed([t / b for t, b in job_pairs if b])}"
        lines.append(line)
    return lines


def _listed(ratios: list[float]) -> str:
    return (", ".join(f"{r:.3f}" for r in ratios) + f" (median {statistics.median(ratios):.3f})") if ratios else "-"


async def compare(args: argparse.Namespace) -> list[str]:
    """--compare URL ADMIN: lmstfy-py (--url/--admin) and another lmstfy-compatible server, e.g. Go lmstfy."""
    ours = Side("ours", args.url, args.admin, dict(args.query))
    theirs = Side("theirs", *args.compare, dict(args.query))
    await alternate((ours, theirs), args, args.rounds, "compare")
    return ratio_table(ours, theirs, ours)


def names(text: str, allowed: list[str]) -> list[str]:
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = set(chosen) - set(allowed)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown: {', '.join(sorted(unknown))}; choose from {', '.join(allowed)}")
    return chosen


def query_pairs(text: str) -> dict[str, str]:
    pairs = [pair.partition("=") for pair in text.split(",") if pair]
    if any(not sep for _, sep, _ in pairs):
        raise argparse.ArgumentTypeError(f"expected K=V,... not {text!r}")
    return {key: value for key, _, value in pairs}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7777", help="data API of the running server")
    parser.add_argument("--admin", default="http://127.0.0.1:7778", help="admin API of the running server")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    parser.add_argument("--clients", type=int, default=32, help="concurrent keep-alive connections")
    parser.add_argument("--scenarios", type=lambda s: names(s, SCENARIOS), default=SCENARIOS, help=",".join(SCENARIOS))
    every_ceiling = ["trivial", "trivial-put", "trivial-redis", "redis"]
    parser.add_argument("--ceilings", type=lambda s: names(s, every_ceiling), default=every_ceiling)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="trivial endpoint workers")
    parser.add_argument("--trivial-app", choices=["raw", "starlette", "redis-py"], default="raw")
    parser.add_argument(
        "--http-server", choices=["hypercorn", "uvicorn"], default="hypercorn", help="the ceilings' HTTP server"
    )
    parser.add_argument("--ack-conns", type=int, default=4, help="consume100: ACK connections per client")
    parser.add_argument("--timer-jobs", type=int, default=2000)
    parser.add_argument("--e2e-rate", type=float, default=0.0, help="e2e: publishes a second in all (0: flat out)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of rest after each scenario")
    parser.add_argument("--server-pid", type=int)
    parser.add_argument("--redis-pid", type=int)
    parser.add_argument("--redis-socket", help="the server's Redis unix socket (embedded: <data-dir>/redis.sock)")
    parser.add_argument("--redis-url", help="the server's Redis URL (an external Redis)")
    parser.add_argument(
        "--query",
        type=query_pairs,
        default={},
        metavar="K=V,...",
        help="more query parameters on every request, e.g. priority=5",
    )
    parser.add_argument(
        "--queue-settings",
        type=query_pairs,
        default={},
        metavar="K=V,...",
        help="settings of each scenario's queue before it runs (SPEC 13), e.g. events=100000",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("URL", "ADMIN"),
        help="also run every scenario on this other server (e.g. Go lmstfy), alternated; print ours/theirs",
    )
    parser.add_argument("--rounds", type=int, default=3, help="--compare: rounds of each server")
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    parser.add_argument("--markdown", action="store_true", help="also print the results as a Markdown table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        if args.compare:
            print("\n".join(runner.run(compare(args))))
            return
        report = runner.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown:
        print(markdown(report))


if __name__ == "__main__":
    main()
