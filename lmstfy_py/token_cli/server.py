"""token-cli commands about the server: pools, version, info, namespaces, the access log."""

from __future__ import annotations

import click

from lmstfy_py.token_cli.app import Cli, pool_option, token
from lmstfy_py.token_cli.render import (
    DEFAULT_POOL,
    fields,
    path,
    render_info,
    render_namespace_deleted,
    render_namespaces,
)


@token.command()
@click.pass_obj
def pools(cli: Cli) -> None:
    """List the configured pools."""
    cli.show(cli.client.call("GET", "/pools"), "\n".join)


@token.command()
@pool_option
@click.pass_obj
def info(cli: Cli, pool: str | None) -> None:
    """List namespaces that had jobs, and their queues."""
    cli.show(cli.client.call("GET", "/info", {"pool": pool}), render_info)


@token.command()
@click.pass_obj
def version(cli: Cli) -> None:
    """Show the server's version and build."""
    cli.show(cli.client.call("GET", "/version"), fields)


@token.command()
@pool_option
@click.pass_obj
def namespaces(cli: Cli, pool: str | None) -> None:
    """List namespaces: tokens, timer, queues.

    For each namespace with jobs or tokens: its token count, its timer size (delayed and
    reserved jobs), and per queue the ready and dead jobs.
    """
    cli.show(cli.client.call("GET", "/namespaces", {"pool": pool}), render_namespaces)


@token.command("namespace-delete")
@click.argument("ns")
@pool_option
@click.option("--purge", is_flag=True, help="Also delete every job of the namespace.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def namespace_delete(cli: Cli, ns: str, pool: str | None, purge: bool, yes: bool) -> None:
    """Delete namespace NS (tokens, limits, jobs).

    Deletes its tokens and their limits; with --purge also every job of it. Asks first
    unless --yes.
    """
    what = "tokens, limits and ALL ITS JOBS" if purge else "tokens and limits"
    if not yes:
        # On stderr, so that stdout stays the answer alone (--json).
        click.confirm(f"Delete namespace {ns} of pool {pool or DEFAULT_POOL} with its {what}?", abort=True, err=True)
    answer = cli.client.call("DELETE", path("namespaces", ns), {"pool": pool, "purge": purge})
    cli.show(answer, render_namespace_deleted)


@token.command()
@click.argument("status", required=False, type=click.Choice(["enable", "disable"]))
@click.pass_obj
def accesslog(cli: Cli, status: str | None) -> None:
    """Show or switch the access log.

    With no argument shows its state; `enable` or `disable` switches it on every process of every
    instance sharing the admin Redis, within a second.
    """
    answer = cli.client.call("POST" if status else "GET", "/accesslog", {"status": status})
    cli.show(answer, lambda got: f"access log: {got['status']}")
