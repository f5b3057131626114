"""token-cli commands for job outcomes (SPEC 13): show or set a queue's settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from lmstfy_py.token_cli.app import Cli, command, pool_option
from lmstfy_py.token_cli.render import path


@command("settings", "ns", "queue")
@click.option("--keep", type=int, metavar="S", help="Seconds an ended job's record is kept (0..2592000, 0 = none).")
@click.option("--events", type=int, metavar="N", help="Events of the queue kept (0..1000000, 0 = off).")
@pool_option
def settings(cli: Cli, ns: str, queue: str, keep: int | None, events: int | None, pool: str | None) -> None:
    """Show the settings of NS/QUEUE, or set those given (the others are kept).

    The server checks the values: a bad one changes nothing.
    """
    changes = {"keep": keep, "events": events}
    method = "GET" if keep is None and events is None else "PUT"
    answer = cli.client.call(method, path("queues", ns, queue, "settings"), {"pool": pool, **changes})
    cli.show(answer, render_settings)


def render_settings(answer: Mapping[str, Any]) -> str:
    events = answer["events"] or "off"
    return f"{answer['namespace']}/{answer['queue']}: keep {answer['keep']}s, events {events}"
