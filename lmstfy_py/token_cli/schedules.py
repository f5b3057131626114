"""token-cli commands for recurring jobs: list a namespace's schedules, delete one."""

from __future__ import annotations

import click

from lmstfy_py.token_cli.app import Cli, pool_option, token
from lmstfy_py.token_cli.render import path, render_schedules


@token.command("cron-list")
@click.argument("ns")
@click.argument("queue", required=False)
@pool_option
@click.pass_obj
def cron_list(cli: Cli, ns: str, queue: str | None, pool: str | None) -> None:
    """List the recurring jobs of NS (of its QUEUE only, when given), with their next and last runs
    (in the schedule's own time zone, its UTC offset shown)."""
    answer = cli.client.call("GET", path("cron", ns), {"pool": pool})
    cli.show(answer, lambda got: render_schedules(got, queue))


@token.command("cron-delete")
@click.argument("ns")
@click.argument("queue")
@click.argument("name")
@pool_option
@click.pass_obj
def cron_delete(cli: Cli, ns: str, queue: str, name: str, pool: str | None) -> None:
    """Delete recurring job NAME of NS/QUEUE (the jobs it published stay)."""
    answer = cli.client.call("DELETE", path("cron", ns, queue, name), {"pool": pool})
    cli.show(answer, lambda _: f"deleted schedule {name} of {ns}/{queue}")
