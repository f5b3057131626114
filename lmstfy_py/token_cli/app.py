"""The token-cli command group: its global options and what each command shares."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from lmstfy_py.token_cli.client import AdminClient, Answer

DEFAULT_ADMIN = "http://127.0.0.1:7778"


@dataclass(frozen=True)
class Cli:
    client: AdminClient
    as_json: bool

    def show(self, answer: Answer, render: Callable[[Any], str]) -> None:
        """The raw answer with --json, else `render` of its JSON (nothing for an empty answer)."""
        if self.as_json:
            if answer.body:
                click.echo(answer.body.decode(errors="replace").rstrip("\n"))
            return
        text = render(answer.json())
        if text:
            click.echo(text)


def _check_admin_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


pool_option = click.option("--pool", metavar="NAME", help="The pool.  [default: default]")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--admin",
    metavar="URL",
    envvar="LMSTFY_ADMIN",
    default=DEFAULT_ADMIN,
    show_default=True,
    callback=_check_admin_url,
    help="Admin API address (env LMSTFY_ADMIN).",
)
@click.option("--user", envvar="LMSTFY_ADMIN_USER", help="Basic-auth user (env LMSTFY_ADMIN_USER).")
@click.option(
    "--password",
    envvar="LMSTFY_ADMIN_PASSWORD",
    help="Basic-auth password (env LMSTFY_ADMIN_PASSWORD: unlike the flag, not seen by ps).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the server's JSON answer as is.")
@click.pass_context
def token(ctx: click.Context, admin: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Manage tokens, limits, namespaces and dead letters of an lmstfy-py server (its admin API).

    \b
    Examples:
      token-cli create demo --description "billing workers"
      token-cli limit-set demo TOKEN --read 100 --write 50 --interval 10
      token-cli deadletter-peek demo orders
      token-cli --json namespaces | jq .

    Errors are one line on stderr and exit code 1.
    """
    ctx.obj = Cli(AdminClient(admin, user, password), as_json)
