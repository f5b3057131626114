#!/usr/bin/env python3
"""Redis memory per delayed job (issue 27, item 4).

Starts a fresh valkey-server (the binary the embedded mode runs) on a free loopback port, reads
INFO memory's used_memory, publishes --jobs delayed jobs through the Engine (a 100-byte body,
delay 1 h, the default ttl and tries, unversioned ids: what `PUT /api/ns/q?delay=3600` stores),
reads used_memory again and prints the difference per job. Then breaks it down on a sample of
the jobs: MEMORY USAGE (SAMPLES 0: exact) of each job's key and its OBJECT ENCODING, of the
timer zset divided by the jobs it holds, of any other key the jobs made (tombstones, indexes,
per-queue keys), and the fields of one job's hash. Last, the Redis CPU of the job steps
(INFO commandstats, FCALL and EVALSHA): per publish above, and per job for --cpu-jobs ready jobs of the
same body reserved 100 at a time, then ACKed 100 at a time (what a change of layout costs reads).

    .venv/bin/python -m benchmarks.bench_memory [--jobs 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py.config import PoolConfig
from lmstfy_py.store import keys, pools
from lmstfy_py.types import NewJob

NS, QUEUE, READY_QUEUE = "memns", "memq", "memready"
BODY_BYTES = 100
DELAY_MS = 3_600_000
BATCH = 1000  # jobs per publish_many (one pipelined round trip)
IN_FLIGHT = 4  # batches at once
SAMPLE = 2000


BODY = bytes(random.getrandbits(8) for _ in range(BODY_BYTES))


async def publish(url: str, jobs: int) -> list[str]:
    engine = pools.engine("default", PoolConfig(name="default", url=url))
    body = BODY
    job_ids: list[str] = []
    try:
        todo = iter(range(0, jobs, BATCH))

        async def publisher() -> None:
            for first in todo:
                batch = [NewJob(body, delay_ms=DELAY_MS) for _ in range(min(BATCH, jobs - first))]
                published = await engine.publish_many(NS, QUEUE, batch)
                job_ids.extend(p.job_id for p in published if p.created)

        await asyncio.gather(*(publisher() for _ in range(IN_FLIGHT)))
    finally:
        await engine.close()
    return job_ids


async def consume_all(url: str, conn: redis.Redis, jobs: int) -> tuple[float, float]:
    """Redis CPU (µs of FCALL and EVALSHA) per job to reserve `jobs` ready jobs 100 at a time, and to ACK them."""
    engine = pools.engine("default", PoolConfig(name="default", url=url))
    try:
        for first in range(0, jobs, BATCH):
            await engine.publish_many(NS, READY_QUEUE, [NewJob(BODY) for _ in range(min(BATCH, jobs - first))])
        conn.config_resetstat()
        taken: list[str] = []
        while batch := await engine.consume(NS, [READY_QUEUE], ttr_ms=600_000, timeout_ms=0, count=100):
            assert all(job.body == BODY for job in batch)
            taken.extend(job.job_id for job in batch)
        reserve_us = script_usec(conn)
        conn.config_resetstat()
        for first in range(0, len(taken), 100):
            await engine.ack_many(NS, READY_QUEUE, taken[first : first + 100])
        ack_us = script_usec(conn)
    finally:
        await engine.close()
    return reserve_us / max(len(taken), 1), ack_us / max(len(taken), 1)


STEP_COMMANDS = ("cmdstat_fcall", "cmdstat_evalsha")  # functions where Redis has them (store/function_library.py)


def script_usec(conn: redis.Redis) -> float:
    stats = conn.info("commandstats")
    return sum(float(stats.get(command, {}).get("usec", 0)) for command in STEP_COMMANDS)


def script_calls(conn: redis.Redis) -> int:
    stats = conn.info("commandstats")
    return sum(int(stats.get(command, {}).get("calls", 0)) for command in STEP_COMMANDS)


def used_memory(conn: redis.Redis) -> int:
    return int(conn.info("memory")["used_memory"])


def usage(conn: redis.Redis, key: str) -> int:
    return int(conn.memory_usage(key, samples=0) or 0)


def encoding(conn: redis.Redis, key: str) -> str:
    found = conn.object("encoding", key)
    return found.decode() if isinstance(found, bytes) else str(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--cpu-jobs", type=int, default=50_000)
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        server = RedisProcess(Path(tmp))
        server.start()
        try:
            conn = server.client()
            conn.flushall()
            before = used_memory(conn)
            conn.config_resetstat()
            started = time.monotonic()
            job_ids = asyncio.run(publish(server.url, opts.jobs))
            took = time.monotonic() - started
            publish_us = script_usec(conn) / max(script_calls(conn), 1)
            after = used_memory(conn)
            report(conn, job_ids, before, after, took)
            reserve_us, ack_us = asyncio.run(consume_all(server.url, conn, opts.cpu_jobs))
            print(f"\nRedis CPU (FCALL/EVALSHA, µs): per publish {publish_us:.2f} (the due-index updates counted in)")
            print(f"  per job reserved {reserve_us:.2f}, ACKed {ack_us:.2f} ({opts.cpu_jobs} ready jobs, 100 per call)")
            conn.close()
        finally:
            server.stop()


def report(conn: redis.Redis, job_ids: list[str], before: int, after: int, took: float) -> None:
    n = len(job_ids)
    server_info = conn.info("server")
    version = f"{server_info.get('redis_version')} (valkey {server_info.get('valkey_version', '-')})"
    print(f"# {version}, {platform.machine()}")
    print(f"published {n} delayed jobs ({BODY_BYTES}-byte body, delay {DELAY_MS // 1000} s) in {took:.1f} s")
    print(f"used_memory: {before} -> {after} bytes")
    print(f"bytes per job (used_memory): {(after - before) / n:.1f}")

    sample = random.sample(job_ids, min(SAMPLE, n))
    job_keys = [keys.job(NS, QUEUE, job_id) for job_id in sample]
    job_bytes = [usage(conn, key) for key in job_keys]
    encodings = Counter(encoding(conn, key) for key in job_keys)
    types = Counter(conn.type(key).decode() for key in job_keys[:50])
    print(f"\njob key ({len(job_keys[0])} bytes of name, e.g. {job_keys[0]}):")
    print(f"  MEMORY USAGE mean {sum(job_bytes) / len(job_bytes):.1f}, min {min(job_bytes)}, max {max(job_bytes)}")
    print(f"  type {dict(types)}, encoding {dict(encodings)}")
    one = job_keys[0]
    if conn.type(one) == b"hash":
        fields = conn.hgetall(one)
        shown = {k.decode(): (len(v), v if len(v) < 16 else b"...") for k, v in fields.items()}
        print(f"  fields (name: length, value): {shown}")
    else:
        print(f"  value length {conn.strlen(one)}")
    print(f"  with a ttl: {conn.pttl(one) > 0}")

    timer = keys.timer(NS)
    timer_bytes = usage(conn, timer)
    members = conn.zcard(timer)
    member = conn.zrange(timer, 0, 0)[0]
    print(f"\ntimer zset {timer}: {members} members, encoding {encoding(conn, timer)}")
    print(f"  MEMORY USAGE {timer_bytes} = {timer_bytes / max(members, 1):.1f} per member; member {len(member)} bytes")

    print("\nevery other key (per-job keys would show here as a prefix with ~N keys):")
    prefixes: Counter[str] = Counter()
    other_bytes: Counter[str] = Counter()
    job_prefix = keys.job_prefix(NS)
    for key in conn.scan_iter(count=10_000):
        name = key.decode()
        if name.startswith(job_prefix) or name == timer:
            continue
        prefix = name.split("/", 1)[0]
        prefixes[prefix] += 1
        other_bytes[prefix] += usage(conn, name)
    for prefix, count in sorted(prefixes.items()):
        print(f"  {prefix}/...: {count} keys, {other_bytes[prefix]} bytes ({other_bytes[prefix] / n:.2f} per job)")

    keyspace = conn.info("keyspace").get("db0", {})
    mean_job = sum(job_bytes) / len(job_bytes)
    accounted = mean_job + timer_bytes / max(members, 1) + sum(other_bytes.values()) / n
    print(f"\nkeys in db0: {keyspace.get('keys')}, with an expiry: {keyspace.get('expires')}")
    print(f"MEMORY USAGE accounts for {accounted:.1f} per job; the rest of used_memory "
          f"({(after - before) / n - accounted:.1f} per job) is the keyspace's tables (main and expires)")  # fmt: skip


if __name__ == "__main__":
    main()
