#!/usr/bin/env python3
"""A/B: the same scenarios of bench.py against two running servers, alternated round by round.

Two builds of lmstfy-py (the code before and after a change), or one server with and without a
parameter (--b-query priority=5) or a queue setting (--b-settings events=100000: each scenario's
queue records its events), each measured in turns so that both see the same noise of a shared
machine; prints each scenario's median req/s and jobs/s for A and B and their ratio B/A, then
each round's own B/A and their median ("paired": on a machine whose speed drifts during the run,
the two sides of one round saw the same speed).

    .venv/bin/python -m benchmarks.ab --a http://127.0.0.1:7777 http://127.0.0.1:7778 \\
        --b http://127.0.0.1:8777 http://127.0.0.1:8778 --rounds 3 --scenarios publish,consume_ack
"""

from __future__ import annotations

import argparse
import asyncio

from benchmarks import bench


async def run(args: argparse.Namespace) -> list[str]:
    a = bench.Side("A", *args.a, bench.query_pairs(args.a_query), bench.query_pairs(args.a_settings))
    b = bench.Side("B", *args.b, bench.query_pairs(args.b_query), bench.query_pairs(args.b_settings))
    settings = ["--duration", str(args.duration), "--clients", str(args.clients), "--scenarios", args.scenarios]
    settings += ["--e2e-rate", str(args.e2e_rate)]
    await bench.alternate((a, b), bench.parse_args([*settings, "--settle", str(args.settle)]), args.rounds, "ab")
    return bench.ratio_table(b, a, a)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", nargs=2, metavar=("URL", "ADMIN"), required=True, help="data and admin API of A")
    parser.add_argument("--b", nargs=2, metavar=("URL", "ADMIN"), required=True, help="data and admin API of B")
    parser.add_argument("--a-query", default="", help="bench.py --query for A (K=V,...)")
    parser.add_argument("--b-query", default="", help="bench.py --query for B (K=V,...)")
    parser.add_argument("--a-settings", default="", help="bench.py --queue-settings for A (K=V,...)")
    parser.add_argument("--b-settings", default="", help="bench.py --queue-settings for B (K=V,...)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="publish,consume_ack")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--e2e-rate", type=float, default=0.0, help="bench.py --e2e-rate")
    args = parser.parse_args(argv)
    print("\n".join(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
