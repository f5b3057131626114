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


def command(name: str, *arguments: str) -> Callable[[Callable[..., None]], click.Command]:
    """The token-cli command NAME: the positional `arguments`, then the options decorating its function,
    which is handed the Cli first."""

    def decorate(function: Callable[..., None]) -> click.Command:
        found = click.pass_obj(function)
        for argument in reversed(arguments):
            found = click.argument(argument)(found)
        return token.command(name)(found)

    return decorate


class _TokenCli(click.Group):
    """Our commands, or lmstfy's invocation (`token-cli HOST:PORT -c -n NS -D DESC`, lmstfy.py)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and _is_lmstfy_invocation(self, args[0]):
            from lmstfy_py.token_cli import lmstfy  # only for this invocation: argparse

            lmstfy.main(args)
        return super().parse_args(ctx, args)


def _is_lmstfy_invocation(group: click.Group, first: str) -> bool:
    """lmstfy's starts with its server address or one of its own options; ours with a command or ours."""
    from lmstfy_py.token_cli.lmstfy import OPTIONS

    if first in group.commands or first.split("=", 1)[0] in _OUR_OPTIONS:
        return False
    if first.startswith("-"):
        # argparse also takes a long option's abbreviation (--desc) and an option's value after "=".
        option = first.split("=", 1)[0]
        return option in OPTIONS or (option.startswith("--") and any(o.startswith(option) for o in OPTIONS))
    return ":" in first  # HOST:PORT (a typo'd command stays click's "No such command")


_OUR_OPTIONS = frozenset({"--admin", "--user", "--password", "--json", "-h", "--help"})


@click.group(cls=_TokenCli, context_settings={"help_option_names": ["-h", "--help"]})
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
      token-cli 127.0.0.1:7778 -c -n demo -D "billing workers"   (lmstfy's invocation)
      token-cli limit-set demo TOKEN --read 100 --write 50 --interval 10
      token-cli deadletter-peek demo orders
      token-cli settings demo orders --max-reserved 20 --rate 2.5 --group-concurrency 2
      token-cli --json namespaces | jq .

    Errors are one line on stderr and exit code 1.
    """
    ctx.obj = Cli(AdminClient(admin, user, password), as_json)
