#!/usr/bin/env python3
"""Flow control (SPEC 14, issue 29): what groups cost, how fair their ring is, limits held exactly.

Starts one `lmstfy-py serve --workers 2` (embedded Redis: two server processes on one Redis) and
runs the scenarios asked for (--scenarios, all by default):

- groups: --groups groups x --per-group jobs (one bulk publish per group, `group=`), consumed and
  ACKed by --clients connections (one consume, then one ACK, per job: bench.py's consume_ack), against
  the same jobs without a group, in alternated rounds (who goes first alternating). Prints each round's
  rate, the server's and its Redis's CPU per job, Redis's used_memory before publishing, once published
  and after the last ACK, and the keys of the queue left (SCAN); then the medians' ratio (target >= 0.7).
- fairness: group A holds --fair-jobs ready jobs (group_concurrency 65535: A is never held by its own
  slots); --trials times, a few of A's jobs are taken, one job of a new group B is published, and jobs
  are consumed one at a time (each ACKed) until B's comes: at which delivery it came (target: <= 2).
- limits: max_reserved=--max-reserved under --consumers consumers (long-poll timeout 1 s; each holds
  its job --hold-ms, then ACKs) for --limit-seconds: the most jobs in flight by the consumers' own count
  (from the answer's arrival to the ACK's sending: within the reservation) and by the queue's stats,
  sampled meanwhile; both must be <= N. Then rate=--rate, burst=--burst under as many consumers (each
  ACKs at once): deliveries per second, and burst + rate*t checked against every prefix of the delivery
  times (t counted from before the first consume was sent): the worst excess must be <= 0.
Exits 1 when a limit or the fairness bound was broken; figures are printed, never asserted.

    python -m benchmarks.bench_flow --rounds 3 --http-server uvicorn
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

from benchmarks import bench
from benchmarks.bench_event_streams import meter_of
from benchmarks.flow_limits import (
    BULK,
    NS,
    Api,
    ack,
    bulks_of,
    capped_run,
    consume,
    publish_bulks,
    rated_run,
    run_all,
    stats,
    worst_excess,
)
from benchmarks.harness.lmstfy_servers import Server
from benchmarks.loadclient import Connection

SCENARIOS = ["groups", "fairness", "limits"]
PROPAGATION_S = 1.1  # a settings change reaches every process within 1 s (SPEC 13)
DRAIN_TIMEOUT_S = 1800.0
STALL_S = 20.0  # no ACK for this long while jobs are left: the drain is stuck, and says where
FAIR_LIMIT = 1000  # deliveries after which a trial gives up on B's job
GROUP_KEY_KINDS = ("gq", "gr", "gs", "gy")  # what the store keeps per group (store/keys.py)

# -- groups: their cost, their memory ----------------------------------------------------------------


async def consume_ack_all(api: Api, meter: bench.Meter, queue: str, total: int, clients: int) -> bench.Result:
    """Consume + ACK until `total` jobs were ACKed, measured from the first consume to the last ACK."""
    rec, ended = bench.Recorder(math.inf), []

    async def worker(number: int) -> None:
        conn = api.connect(number)
        try:
            while rec.jobs < total:
                job_id = await consume(conn, api, queue, rec)
                if job_id is not None:
                    await ack(conn, api, queue, job_id, rec)
                    rec.done()
                    if rec.jobs == total:
                        ended.append(meter.snapshot())
        finally:
            await conn.close()

    async def watchdog() -> None:
        seen, since = -1, time.monotonic()
        while rec.jobs < total:
            if rec.jobs != seen:
                seen, since = rec.jobs, time.monotonic()
            elif time.monotonic() - since > STALL_S:
                conn = api.connect()
                shown = await stats(conn, api, queue)
                await conn.close()
                raise RuntimeError(f"{queue}: stuck at {rec.jobs:,} of {total:,} jobs ACKed, none for {STALL_S:g} s; "
                                   f"{shown}")  # fmt: skip
            await asyncio.sleep(0.2)

    start = meter.snapshot()
    await run_all([watchdog(), *(worker(n) for n in range(clients))], DRAIN_TIMEOUT_S)
    if rec.jobs < total:
        raise RuntimeError(f"{queue}: {rec.jobs} of {total} jobs ACKed within {DRAIN_TIMEOUT_S:g} s")
    return bench.result_of(queue, rec, start, ended[0])


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def keys_left(client: redis.Redis, queue: str) -> dict[str, int]:
    """How many keys of each kind the namespace holds for `queue` (its counters and settings stay) and
    for any group."""
    kinds: collections.Counter[str] = collections.Counter()
    for key in client.scan_iter(match=f"*{{{NS}}}*", count=1000):
        kind, _, rest = key.decode().partition("/")
        if kind in GROUP_KEY_KINDS or f"/{queue}" in f"/{rest}/":
            kinds[kind] += 1
    return dict(sorted(kinds.items()))


async def groups_round(api: Api, server: Server, grouped: bool, args: argparse.Namespace) -> tuple[float, float]:
    """One side of a round: its rate (jobs/s) and the server's and Redis's CPU per job (µs)."""
    queue = "grouped" if grouped else "plain"
    client = redis.Redis(unix_socket_path=str(server.redis_socket))
    before = used_memory(client)
    bulks = [(f"g{n}" if grouped else None, args.per_group) for n in range(args.groups)]
    await publish_bulks(api, queue, bulks, args.clients)
    published = used_memory(client)
    total = args.groups * args.per_group
    result = await consume_ack_all(api, meter_of(server), queue, total, args.clients)
    await asyncio.sleep(args.settle)  # frees Redis makes after the step that ended the last job
    after = used_memory(client)
    cpu_us = 1e4 * ((result.server_cpu_pct or 0) + (result.redis_cpu_pct or 0)) / max(result.jobs_per_s, 1.0)
    print(
        f"  {'groups' if grouped else 'plain '}: {total:,} jobs in {result.seconds:.1f} s: "
        f"{result.jobs_per_s:,.0f} jobs/s, CPU {cpu_us:,.0f} µs/job (server {result.server_cpu_pct or 0:.0f}%, "
        f"redis {result.redis_cpu_pct or 0:.0f}%, other {result.other_cpu_pct:.0f}%), request p50 "
        f"{result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.requests - 2 * total:,} consumes empty; "
        f"used_memory {before:,} B before, {published:,} published ({(published - before) / total:,.0f} B/job), "
        f"{after:,} after the last ACK ({after - before:+,} B); keys left {keys_left(client, queue)}",
        flush=True,
    )
    client.close()
    return result.jobs_per_s, cpu_us


async def groups(api: Api, server: Server, args: argparse.Namespace) -> None:
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    print(f"groups: {args.groups:,} groups x {args.per_group} jobs, {args.clients} clients, consume + ACK")
    for number in range(1, args.rounds + 1):
        print(f"round {number}/{args.rounds}", flush=True)
        for grouped in (False, True) if number % 2 else (True, False):
            rate, cpu_us = await groups_round(api, server, grouped, args)
            rates[grouped].append(rate)
            cpu[grouped].append(cpu_us)
        print(f"  ratio groups/plain: rate {rates[True][-1] / rates[False][-1]:.3f}, "
              f"CPU per job {cpu[True][-1] / cpu[False][-1]:.3f}", flush=True)  # fmt: skip
    plain, with_groups = statistics.median(rates[False]), statistics.median(rates[True])
    rounds = ", ".join(f"{g / p:.3f}" for g, p in zip(rates[True], rates[False], strict=True))
    print(f"groups: median {with_groups:,.0f} jobs/s with groups, {plain:,.0f} without: "
          f"ratio {with_groups / plain:.3f} (rounds {rounds}; target >= 0.7); CPU per job "
          f"{statistics.median(cpu[True]):,.0f} µs vs {statistics.median(cpu[False]):,.0f} µs: "
          f"ratio {statistics.median(cpu[True]) / statistics.median(cpu[False]):.3f}")  # fmt: skip


# -- fairness ------------------------------------------------------------------------------------------


async def deliveries_until(conn: Connection, api: Api, queue: str, wanted: str) -> int:
    """Consumes (and ACKs) one job at a time until `wanted` comes: how many it took (FAIR_LIMIT + 1: never)."""
    for number in range(1, FAIR_LIMIT + 1):
        job_id = await consume(conn, api, queue)
        if job_id is not None:
            await ack(conn, api, queue, job_id)
        if job_id == wanted:
            return number
    return FAIR_LIMIT + 1


async def fairness(api: Api, args: argparse.Namespace) -> bool:
    queue, rng = "fair", random.Random(29)
    await api.settings(queue, group_concurrency=65535)
    await publish_bulks(api, queue, bulks_of(args.fair_jobs, "A"), args.clients)
    print(f"fairness: group A holds {args.fair_jobs:,} ready jobs (group_concurrency 65535)", flush=True)
    conn, worst = api.connect(), 0
    try:
        for trial in range(1, args.trials + 1):
            for _ in range(rng.randint(0, args.fair_skip)):  # B comes at another point of A's run each time
                job_id = await consume(conn, api, queue)
                if job_id is not None:
                    await ack(conn, api, queue, job_id)
            ready = (await stats(conn, api, queue))["ready"]
            answer = await conn.request("PUT", api.path(queue), api.params(group=f"B{trial}"), b"B")
            position = await deliveries_until(conn, api, queue, str(bench.expect(answer, 201).json()["job_id"]))
            worst = max(worst, position)
            came = f"delivery {position}" if position <= FAIR_LIMIT else f"none of the next {FAIR_LIMIT} deliveries"
            print(f"  trial {trial}: {ready:,} of A ready; group B{trial}'s job came at {came}", flush=True)
    finally:
        await conn.close()
    print(f"fairness: worst {worst} over {args.trials} trials (target <= 2)")
    return worst <= 2


# -- the limits ------------------------------------------------------------------------------------------


async def limits(api: Api, args: argparse.Namespace) -> bool:
    hold_s, n = args.hold_ms / 1000, args.max_reserved
    await api.settings("capped", max_reserved=n)
    # More than the consumers can take within the window, N at a time.
    await publish_bulks(api, "capped", bulks_of(int(n / hold_s * args.limit_seconds * 1.2) + BULK), args.clients)
    await asyncio.sleep(PROPAGATION_S)
    got = await capped_run(api, "capped", args.consumers, hold_s, args.limit_seconds, math.inf)
    capped_ok = got.most_in_flight <= n and got.most_reserved <= n
    print(
        f"max_reserved={n}, {args.consumers} consumers, hold {args.hold_ms:g} ms: {got.delivered:,} jobs in "
        f"{got.seconds:.1f} s ({got.delivered / got.seconds:,.0f} jobs/s); most in flight {got.most_in_flight} "
        f"(consumers' count), most reserved {got.most_reserved} (stats, {got.samples:,} samples): "
        f"{'held' if capped_ok else 'EXCEEDED'}",
        flush=True,
    )
    await api.settings("rated", rate=args.rate, burst=args.burst)
    await publish_bulks(api, "rated", bulks_of(int(args.rate * args.limit_seconds * 2) + args.burst + BULK), 4)
    await asyncio.sleep(PROPAGATION_S)
    started, times = await rated_run(api, "rated", args.consumers, args.limit_seconds)
    excess = worst_excess(started, times, args.rate, args.burst)
    per_second = collections.Counter(int(t - started) for t in times)
    seconds = ", ".join(str(per_second[s]) for s in range(math.ceil(args.limit_seconds)))
    in_window = sum(1 for t in times if t - started <= args.limit_seconds)
    print(
        f"rate={args.rate:g}/s burst={args.burst}, {args.consumers} consumers: {in_window:,} delivered in "
        f"{args.limit_seconds:g} s ({(in_window - args.burst) / args.limit_seconds:,.1f}/s past the burst; "
        f"per second {seconds}); burst + rate*t over every prefix: worst excess {excess:+.2f} "
        f"({'held' if excess <= 0 else 'EXCEEDED'})"
    )
    return capped_ok and excess <= 0


# -- main ------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, server: Server) -> bool:
    api, ok = Api.of(server), True
    if "groups" in args.scenarios:
        await groups(api, server, args)
    if "fairness" in args.scenarios:
        ok = await fairness(api, args) and ok
    if "limits" in args.scenarios:
        ok = await limits(api, args) and ok
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, of {SCENARIOS}")
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--per-group", type=int, default=10, help="jobs per group (<= 64: one bulk each)")
    parser.add_argument("--clients", type=int, default=32, help="connections publishing, and consuming in groups")
    parser.add_argument("--rounds", type=int, default=3, help="groups: rounds of each (alternated)")
    parser.add_argument("--settle", type=float, default=1.0, help="groups: seconds before used_memory is read")
    parser.add_argument("--fair-jobs", type=int, default=100_000, help="fairness: group A's ready jobs")
    parser.add_argument("--trials", type=int, default=5, help="fairness: B's jobs published")
    parser.add_argument("--fair-skip", type=int, default=50, help="fairness: most of A's jobs taken between trials")
    parser.add_argument("--consumers", type=int, default=64, help="limits: concurrent consumers")
    parser.add_argument("--max-reserved", type=int, default=10)
    parser.add_argument("--hold-ms", type=float, default=20.0, help="limits: how long a consumer holds a job")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--limit-seconds", type=float, default=5.0, help="limits: each run's window")
    parser.add_argument("--workers", type=int, default=2, help="the server's worker processes")
    parser.add_argument("--http-server", choices=["hypercorn", "uvicorn"], help="the server's (default: its own)")
    args = parser.parse_args(argv)
    args.scenarios = bench.names(args.scenarios, SCENARIOS)
    with (
        tempfile.TemporaryDirectory() as workdir,
        Server(Path(workdir), args=["--workers", str(args.workers)], http_server=args.http_server) as server,
    ):
        server.start()
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        print(f"bench_flow: server on {server.data_url} (--workers {args.workers}), {bench.machine()}, "
              f"load average {load}", flush=True)  # fmt: skip
        ok = asyncio.run(run(args, server))
        server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
