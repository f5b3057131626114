"""token-cli commands for tokens and their throttle limits."""

from __future__ import annotations

import click

from lmstfy_py.token_cli.app import Cli, pool_option, token
from lmstfy_py.token_cli.client import AdminClient, HttpError
from lmstfy_py.token_cli.render import path, pooled, render_limit, render_limits, render_tokens


@token.command()
@click.argument("ns")
@click.option("--description", required=True, help="What the token is for.")
@click.option(
    "--token", "user_token", metavar="TOKEN", help="Store this token (20+ characters) instead of a random one."
)
@click.option("--scope", metavar="S,...", help="Only these of publish, consume, read, manage (default: all).")
@click.option("--queues", metavar="P,...", help="Only queues matching these globs: *, ?, [...] (default: all).")
@pool_option
@click.pass_obj
def create(
    cli: Cli,
    ns: str,
    description: str,
    user_token: str | None,
    scope: str | None,
    queues: str | None,
    pool: str | None,
) -> None:
    """Create a token for namespace NS and print it.

    The token is printed alone (prefixed "pool:" for a pool other than default), so a
    script can capture it: TOKEN=$(token-cli create demo --description workers).
    A token's scopes and queues never change: delete it and create another.
    """
    given = {"token": user_token or None, "scope": scope, "queues": queues}
    form = {"description": description, **{name: value for name, value in given.items() if value is not None}}
    cli.show(cli.client.call("POST", path("token", ns), {"pool": pool}, form=form), lambda got: got["token"])


@token.command("list")
@click.argument("ns")
@pool_option
@click.pass_obj
def list_tokens(cli: Cli, ns: str, pool: str | None) -> None:
    """List the tokens of NS, their descriptions and (when one has any) their scopes and queues."""
    cli.show(cli.client.call("GET", path("token", ns), {"pool": pool}), render_tokens)


@token.command()
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def delete(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Delete TOKEN of namespace NS (and its limit)."""
    cli.show(cli.client.call("DELETE", path("token", ns, pooled(token, pool))), lambda _: f"deleted token {token}")


def _limit_path(ns: str, token: str, pool: str | None) -> str:
    return path("token", ns, pooled(token, pool), "limit")


@token.command("limit-set")
@click.argument("ns")
@click.argument("token")
@click.option("--read", type=click.IntRange(min=0), required=True, help="Consumes allowed per interval.")
@click.option("--write", type=click.IntRange(min=0), required=True, help="Publishes allowed per interval.")
@click.option("--interval", type=click.IntRange(min=0), required=True, help="The interval, in seconds.")
@pool_option
@click.pass_obj
def limit_set(cli: Cli, ns: str, token: str, read: int, write: int, interval: int, pool: str | None) -> None:
    """Create or update the throttle limit of TOKEN.

    At most --read consumes and --write publishes per --interval seconds. Tries POST
    (create); when the token already has a limit, replaces it with PUT.
    """
    limiter = {"read": read, "write": write, "interval": interval}
    route = _limit_path(ns, token, pool)
    try:
        answer = cli.client.call("POST", route, data=limiter)
    except HttpError as exc:
        # POST refuses an existing limit with 400; only then is PUT the right call (else keep POST's error).
        if exc.status != 400 or not _limit_exists(cli.client, route):
            raise
        answer = cli.client.call("PUT", route, data=limiter)
    verb = "created" if answer.status == 201 else "updated"
    cli.show(answer, lambda _: f"{verb} the limit of {token}: {render_limit(limiter)}")


def _limit_exists(client: AdminClient, route: str) -> bool:
    try:
        client.call("GET", route)
    except HttpError as exc:
        if exc.status == 404:
            return False
        raise
    return True


@token.command("limit-get")
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def limit_get(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Show the throttle limit of TOKEN.

    Exit code 1 (the server's 404) when the token has none.
    """
    cli.show(cli.client.call("GET", _limit_path(ns, token, pool)), render_limit)


@token.command("limit-delete")
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def limit_delete(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Remove the throttle limit of TOKEN."""
    answer = cli.client.call("DELETE", _limit_path(ns, token, pool))
    cli.show(answer, lambda _: f"deleted the limit of {token}")


@token.command()
@click.pass_obj
def limits(cli: Cli) -> None:
    """List every throttle limit."""
    cli.show(cli.client.call("GET", "/limits"), render_limits)
