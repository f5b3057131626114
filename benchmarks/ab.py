#!/usr/bin/env python3
"""A/B: the same scenarios of bench.py against two running servers, alternated round by round.

Two builds of lmstfy-py (the code before and after a change), or one server with and without a
parameter (--b-query priority=5), each measured in turns so that both see the same noise of a
shared machine; prints each scenario's median req/s and jobs/s for A and B and their ratio B/A.

    .venv/bin/python benchmarks/ab.py --a http://127.0.0.1:7777 http://127.0.0.1:7778 \\
        --b http://127.0.0.1:8777 http://127.0.0.1:8778 --rounds 3 --scenarios publish,consume_ack
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench


@dataclass
class Side:
    name: str
    url: str
    admin: str
    query: str
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # scenario -> (req/s, jobs/s)

    def bench_args(self, args: argparse.Namespace) -> list[str]:
        argv = ["--url", self.url, "--admin", self.admin, "--duration", str(args.duration)]
        argv += ["--clients", str(args.clients), "--scenarios", args.scenarios, "--ceilings", ""]
        argv += ["--settle", str(args.settle)]
        return argv + (["--query", self.query] if self.query else [])


async def one_round(side: Side, args: argparse.Namespace) -> None:
    report = await bench.run(bench.parse_args(side.bench_args(args)))
    for result in report["results"]:
        side.rates.setdefault(result["name"], []).append((result["req_per_s"], result["jobs_per_s"]))


def summary(a: Side, b: Side) -> list[str]:
    lines = [f"{'scenario':<18}{'A req/s':>10}{'B req/s':>10}{'B/A':>7}{'A jobs/s':>11}{'B jobs/s':>11}{'B/A':>7}"]
    for name, a_rates in a.rates.items():
        b_rates = b.rates.get(name, [])
        if not b_rates:
            continue
        a_req, b_req = (statistics.median(r for r, _ in rates) for rates in (a_rates, b_rates))
        a_jobs, b_jobs = (statistics.median(j for _, j in rates) for rates in (a_rates, b_rates))
        lines.append(
            f"{name:<18}{a_req:>10,.0f}{b_req:>10,.0f}{b_req / a_req:>7.3f}{a_jobs:>11,.0f}{b_jobs:>11,.0f}"
            f"{b_jobs / a_jobs:>7.3f}"
        )
    return lines


async def run(args: argparse.Namespace) -> list[str]:
    a = Side("A", *args.a, args.a_query)
    b = Side("B", *args.b, args.b_query)
    for round_ in range(args.rounds):
        # Alternate who goes first, so neither always runs on a machine the other just warmed.
        for side in (a, b) if round_ % 2 == 0 else (b, a):
            print(f"ab: round {round_ + 1}/{args.rounds}, {side.name} ({side.url} {side.query})", flush=True)
            await one_round(side, args)
    return summary(a, b)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", nargs=2, metavar=("URL", "ADMIN"), required=True, help="data and admin API of A")
    parser.add_argument("--b", nargs=2, metavar=("URL", "ADMIN"), required=True, help="data and admin API of B")
    parser.add_argument("--a-query", default="", help="bench.py --query for A (K=V,...)")
    parser.add_argument("--b-query", default="", help="bench.py --query for B (K=V,...)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="publish,consume_ack")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--settle", type=float, default=2.0)
    args = parser.parse_args(argv)
    print("\n".join(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
