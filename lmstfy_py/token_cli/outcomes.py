"""token-cli commands for a queue's settings (SPEC 13's outcomes, SPEC 14's flow-control limits) and
for promoting a delayed job (SPEC 14)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from lmstfy_py.token_cli.app import Cli, command, pool_option
from lmstfy_py.token_cli.render import path

# The limits a queue without flow control has (SPEC 14): shown only when a queue differs.
LIMIT_DEFAULTS: dict[str, object] = {"max_reserved": 0, "rate": 0, "burst": None, "group_concurrency": 1}


@command("settings", "ns", "queue")
@click.option("--keep", type=int, metavar="S", help="Seconds an ended job's record is kept (0..2592000, 0 = none).")
@click.option("--events", type=int, metavar="N", help="Events of the queue kept (0..1000000, 0 = off).")
@click.option("--max-reserved", type=int, metavar="N", help="Jobs reserved at once (0..4294967295, 0 = unlimited).")
@click.option(
    "--rate", metavar="R", help="Jobs delivered a second: 0.5, 200 (0..1000000, 6 decimals at most; 0 = off)."
)
@click.option("--burst", type=int, metavar="B", help="Tokens the rate's bucket holds (1..1000000).")
@click.option("--no-burst", is_flag=True, help="Unset the burst: back to max(1, ceil(rate)).")
@click.option("--group-concurrency", type=int, metavar="N", help="Jobs of one group reserved at once (1..65535).")
@pool_option
def settings(
    cli: Cli,
    ns: str,
    queue: str,
    keep: int | None,
    events: int | None,
    max_reserved: int | None,
    rate: str | None,
    burst: int | None,
    no_burst: bool,
    group_concurrency: int | None,
    pool: str | None,
) -> None:
    """Show the settings of NS/QUEUE, or set those given (the others are kept).

    The server checks the values first: a bad one changes nothing.
    """
    if burst is not None and no_burst:
        raise click.UsageError("--burst and --no-burst exclude each other")
    changes = {"keep": keep, "events": events, "max_reserved": max_reserved, "rate": rate}
    changes |= {"burst": "" if no_burst else burst, "group_concurrency": group_concurrency}
    method = "GET" if all(value is None for value in changes.values()) else "PUT"
    answer = cli.client.call(method, path("queues", ns, queue, "settings"), {"pool": pool, **changes})
    cli.show(answer, render_settings)


def render_settings(answer: Mapping[str, Any]) -> str:
    events = answer["events"] or "off"
    shown = f"{answer['namespace']}/{answer['queue']}: keep {answer['keep']}s, events {events}"
    limits = {name: answer.get(name, default) for name, default in LIMIT_DEFAULTS.items()}
    if limits == LIMIT_DEFAULTS:
        return shown
    rate = limits["rate"]
    # The server's 6 decimals at most, never an exponent ("0.00001/s", not "1e-05/s").
    rated = (f"{rate:.6f}".rstrip("0").rstrip(".") if isinstance(rate, int | float) else str(rate)) + "/s"
    shown += f", max_reserved {limits['max_reserved'] or 'unlimited'}, rate {rated if rate else 'off'}"
    burst = limits["burst"]
    return shown + f", burst {'default' if burst is None else burst}, group_concurrency {limits['group_concurrency']}"


@command("promote", "ns", "queue", "job_id")
@pool_option
def promote(cli: Cli, ns: str, queue: str, job_id: str, pool: str | None) -> None:
    """Make the delayed job JOB_ID of NS/QUEUE ready now, as if it had come due.

    Its priority and group are kept. A job that is not delayed (ready, reserved, dead) is refused.
    """
    answer = cli.client.call("PUT", path("queues", ns, queue, "job", job_id, "promote"), {"pool": pool})
    cli.show(answer, lambda _: f"promoted {job_id}")
