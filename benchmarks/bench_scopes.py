#!/usr/bin/env python3
"""Scoped tokens (SPEC 15, issue 30): what a token's scopes and queue patterns cost a request.

Starts one `lmstfy-py serve --workers 1` (embedded Redis) and measures publish and consume+ACK
(bench.py's workers, on queues named q*) with an unrestricted token and with a scoped one
(scope=publish,consume,read, queues='q*'), in alternated rounds (who goes first alternating), so
both see the same noise of a shared machine. Prints each run's rate and the server process's CPU per
request (from /proc), then the medians and their ratios scoped/unrestricted (target: 1 within noise).

    python -m benchmarks.bench_scopes --rounds 3 --duration 6
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import timeit
from pathlib import Path

import httpx

from benchmarks import bench
from benchmarks.bench_event_streams import meter_of
from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.admin import grants

NS = "bench-scopes"
SCOPED = {"scope": "publish,consume,read", "queues": "q*"}
SIDES = ("unrestricted", "scoped")
SCENARIOS = ("publish", "consume_ack")


def create_token(admin: str, grant: dict[str, str]) -> str:
    answer = httpx.post(f"{admin}/token/{NS}", params={"description": "bench_scopes", **grant}, timeout=10)
    answer.raise_for_status()
    return str(answer.json()["token"])


async def run_one(t: bench.Target, meter: bench.Meter, scenario: str) -> bench.Result:
    queue = f"q-{scenario}"
    if scenario == "publish":
        return await bench.measure(scenario, meter, [bench.publisher(t, queue) for _ in range(t.clients)], t.duration)
    await bench.prefill(t, queue, int(bench.PREFILL_PER_S["consume_ack"] * t.duration))
    return await bench.measure(scenario, meter, [bench.consumer(t, queue) for _ in range(t.clients)], t.duration)


def check_costs(calls: int) -> None:
    """The grant check alone, in this process (web/target.py's condition): ns per request."""
    scoped = grants.parse(SCOPED["scope"], SCOPED["queues"])
    names = [f"q-{n}" for n in range(calls)]

    def check(grant: grants.Grant, queue: str) -> bool:
        return grant.unrestricted or grant.allows(grants.PUBLISH, queue)

    costs = {
        "unrestricted": timeit.timeit(lambda: check(grants.UNRESTRICTED, "q-publish"), number=calls),
        "scoped, queue seen before": timeit.timeit(lambda: check(scoped, "q-publish"), number=calls),
        "scoped, a new queue each time": timeit.timeit(lambda: check(scoped, names.pop()), number=calls),
    }
    print("grant check per request: " + ", ".join(f"{name} {1e9 * s / calls:.0f} ns" for name, s in costs.items()))


def cpu_us(result: bench.Result) -> float:
    """The server process's CPU µs per request."""
    return 1e4 * (result.server_cpu_pct or 0.0) / max(result.req_per_s, 1.0)


async def run(args: argparse.Namespace, server: Server) -> None:
    check_costs(args.check_calls)
    tokens = {"unrestricted": create_token(server.admin_url, {}), "scoped": create_token(server.admin_url, SCOPED)}
    meter = meter_of(server)
    rates: dict[tuple[str, str], list[float]] = {(s, n): [] for s in SIDES for n in SCENARIOS}
    cpu: dict[tuple[str, str], list[float]] = {(s, n): [] for s in SIDES for n in SCENARIOS}
    for number in range(1, args.rounds + 1):
        print(f"round {number}/{args.rounds}", flush=True)
        for side in SIDES if number % 2 else SIDES[::-1]:
            target = bench.Target(bench.address_of(server.data_url), NS, tokens[side], args.clients, args.duration, 1)
            for scenario in SCENARIOS:
                result = await run_one(target, meter, scenario)
                rates[side, scenario].append(result.req_per_s)
                cpu[side, scenario].append(cpu_us(result))
                print(f"  {side:<12} {bench.line_of(result)}  server µs/req {cpu_us(result):.0f}", flush=True)
                httpx.delete(f"{server.data_url}/api/{NS}/q-{scenario}", params={"token": tokens["unrestricted"]})
                await asyncio.sleep(args.settle)  # the last run's queue deleted, its connections closed
    for scenario in SCENARIOS:
        base, scoped = (statistics.median(rates[s, scenario]) for s in SIDES)
        base_cpu, scoped_cpu = (statistics.median(cpu[s, scenario]) for s in SIDES)
        rounds = ", ".join(
            f"{b / a:.3f}" for a, b in zip(cpu["unrestricted", scenario], cpu["scoped", scenario], strict=True)
        )
        print(
            f"{scenario}: median {base:,.0f} req/s unrestricted, {scoped:,.0f} scoped: rate ratio {scoped / base:.3f}; "
            f"server CPU {base_cpu:.0f} vs {scoped_cpu:.0f} µs/req: ratio {scoped_cpu / base_cpu:.3f} (rounds {rounds})"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each side (alternated)")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds of load per scenario and side")
    parser.add_argument("--clients", type=int, default=32, help="connections")
    parser.add_argument("--settle", type=float, default=1.0, help="rest between runs, seconds")
    parser.add_argument("--check-calls", type=int, default=200_000, help="timeit calls of the grant check alone")
    parser.add_argument("--http-server", choices=["hypercorn", "uvicorn"], help="the server's (default: its own)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        server = Server(Path(workdir), args=["--workers", "1"], http_server=args.http_server)
        with server:
            server.start()
            asyncio.run(run(args, server))


if __name__ == "__main__":
    main()
