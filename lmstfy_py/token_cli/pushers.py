"""token-cli commands for push groups (lmstfy's pusher API): list, get, create, update, delete."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from lmstfy_py.token_cli.app import Cli, command, pool_option, token
from lmstfy_py.token_cli.render import path, render_pusher, render_pushers, render_pushers_of

F = TypeVar("F", bound=Callable[..., Any])


def _settings(required: bool) -> Callable[[F], F]:
    """The options of create (some required) and of update (all optional: what is left out is kept)."""

    def decorate(command: F) -> F:
        for option in reversed(
            [
                click.option(
                    "--queue",
                    "queues",
                    multiple=True,
                    required=required,
                    help="A queue to push (repeat for up to 16; the first wins).",
                ),
                click.option("--endpoint", required=required, metavar="URL", help="Where jobs are POSTed."),
                click.option(
                    "--workers", type=click.IntRange(1, 64), required=required, help="Deliveries at once per server."
                ),
                click.option(
                    "--timeout",
                    type=click.IntRange(1, 3600),
                    required=required,
                    help="Seconds a POST may take, and before a failed job comes back.",
                ),
                click.option("--backoff-ms", type=click.IntRange(min=1), help="Exponential backoff: the first delay."),
                click.option("--backoff-max-ms", type=click.IntRange(min=1), help="Exponential backoff: the longest."),
                click.option(
                    "--max-attempts", type=click.IntRange(min=1), help="Then the job goes to the dead letter."
                ),
                click.option(
                    "--secret",
                    envvar="LMSTFY_PUSH_SECRET",
                    help='Sign POSTs with it (16+ bytes; "" stops signing). Env LMSTFY_PUSH_SECRET is not seen by ps.',
                ),
                pool_option,
            ]
        ):
            command = option(command)
        return command

    return decorate


def _body(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON the admin API takes, from the options given."""
    body: dict[str, Any] = {name: settings[name] for name in ("endpoint", "workers", "timeout") if settings[name]}
    if settings["queues"]:
        body["queues"] = list(settings["queues"])
    if settings["backoff_ms"] or settings["backoff_max_ms"]:
        body["backoff"] = "exponential"
        body.update({name: settings[name] for name in ("backoff_ms", "backoff_max_ms") if settings[name]})
    if settings["max_attempts"]:
        body["max_attempts"] = settings["max_attempts"]
    if settings["secret"] is not None:  # "" drops the secret
        body["secret"] = settings["secret"]
    return body


@token.command("pushers")
@click.argument("ns", required=False)
@pool_option
@click.pass_obj
def list_pushers(cli: Cli, ns: str | None, pool: str | None) -> None:
    """List the push groups of every namespace, or with NS, those of NS and how each is set."""
    if ns is None:
        cli.show(cli.client.call("GET", "/pushers"), render_pushers)
    else:
        cli.show(cli.client.call("GET", path("pusher", ns), {"pool": pool}), render_pushers_of)


@command("pusher-get", "ns", "group")
@pool_option
def get_pusher(cli: Cli, ns: str, group: str, pool: str | None) -> None:
    """Show how push group GROUP of NS is set (its secret never: only whether it signs)."""
    cli.show(cli.client.call("GET", path("pusher", ns, group), {"pool": pool}), render_pusher)


@command("pusher-create", "ns", "group")
@_settings(required=True)
def create_pusher(cli: Cli, /, ns: str, group: str, pool: str | None, **settings: Any) -> None:
    """Push the jobs of NS's --queue(s) to --endpoint as push group GROUP.

    Every server process consumes the queues with --workers deliveries at once and POSTs
    each job to the endpoint; a 2xx answer ACKs it, anything else brings it back after
    --timeout seconds (or the backoff), until --max-attempts sends it to the dead letter.
    """
    answer = cli.client.call("POST", path("pusher", ns, group), {"pool": pool}, data=_body(settings))
    cli.show(answer, lambda _: f"created push group {group} of {ns}")


@command("pusher-update", "ns", "group")
@_settings(required=False)
def update_pusher(cli: Cli, /, ns: str, group: str, pool: str | None, **settings: Any) -> None:
    """Change push group GROUP of NS: the options given replace, the others stay."""
    body = _body(settings)
    if not body:
        raise click.UsageError("nothing to change: give at least one option")
    answer = cli.client.call("PUT", path("pusher", ns, group), {"pool": pool}, data=body)
    cli.show(answer, lambda _: f"updated push group {group} of {ns}")


@command("pusher-delete", "ns", "group")
@pool_option
def delete_pusher(cli: Cli, ns: str, group: str, pool: str | None) -> None:
    """Stop pushing: delete push group GROUP of NS (its queues and jobs stay)."""
    answer = cli.client.call("DELETE", path("pusher", ns, group), {"pool": pool})
    cli.show(answer, lambda _: f"deleted push group {group} of {ns}")
