"""token-cli commands for a queue's dead letter: peek, respawn, delete (the oldest, or one by id), and pause."""

from __future__ import annotations

import click

from lmstfy_py.token_cli.app import Cli, command, pool_option
from lmstfy_py.token_cli.render import counted, path, render_dead_page, render_deadletter


@command("deadletter-peek", "ns", "queue")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Jobs to show, oldest first.")
@pool_option
def deadletter_peek(cli: Cli, ns: str, queue: str, limit: int, pool: str | None) -> None:
    """Show the oldest dead jobs of NS/QUEUE.

    Shows the dead letter's size and its oldest jobs; a job's data is shown as text when it
    is UTF-8 (escaped, cut at 60 characters), else as its size. --json has the full data.
    """
    answer = cli.client.call("GET", path("deadletter", ns, queue), {"pool": pool, "limit": limit})
    cli.show(answer, render_deadletter)


@command("deadletter-respawn", "ns", "queue")
@click.option(
    "--limit", type=click.IntRange(min=1), default=1, show_default=True, help="Jobs to respawn, oldest first."
)
@click.option("--ttl", type=click.IntRange(min=0), default=86400, show_default=True, help="Their new ttl; 0 = forever.")
@pool_option
def deadletter_respawn(cli: Cli, ns: str, queue: str, limit: int, ttl: int, pool: str | None) -> None:
    """Move dead jobs of NS/QUEUE back to ready.

    The oldest --limit dead jobs become ready again, with one try and a ttl of --ttl seconds.
    """
    answer = cli.client.call("PUT", path("deadletter", ns, queue), {"pool": pool, "limit": limit, "ttl": ttl})
    cli.show(answer, lambda got: f"respawned {counted(got['count'], 'job')} of {ns}/{queue}")


@command("deadletter-delete", "ns", "queue")
@click.option("--limit", type=click.IntRange(min=1), default=1, show_default=True, help="Jobs to delete, oldest first.")
@pool_option
def deadletter_delete(cli: Cli, ns: str, queue: str, limit: int, pool: str | None) -> None:
    """Delete dead jobs of NS/QUEUE for good."""
    answer = cli.client.call("DELETE", path("deadletter", ns, queue), {"pool": pool, "limit": limit})
    cli.show(answer, lambda got: f"deleted {counted(got['count'], 'dead job')} of {ns}/{queue}")


@command("deadletter-jobs", "ns", "queue")
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Jobs per page.")
@click.option("--after", metavar="JOB_ID", help="Start after this job (the `more:` of the previous page).")
@pool_option
def deadletter_jobs(cli: Cli, ns: str, queue: str, limit: int, after: str | None, pool: str | None) -> None:
    """List the dead jobs of NS/QUEUE, oldest first, with why and when each died."""
    query = {"pool": pool, "limit": limit, "after": after}
    cli.show(cli.client.call("GET", path("deadletter", ns, queue, "jobs"), query), render_dead_page)


@command("deadletter-respawn-job", "ns", "queue", "job_id")
@click.option("--ttl", type=click.IntRange(min=0), help="Its new ttl in seconds; 0 = forever.  [default: 86400]")
@click.option("--tries", type=click.IntRange(1, 65535), default=1, show_default=True, help="Deliveries it may have.")
@click.option("--delay", type=click.IntRange(min=0), default=0, show_default=True, help="Seconds before it is ready.")
@pool_option
def deadletter_respawn_job(
    cli: Cli, ns: str, queue: str, job_id: str, ttl: int | None, tries: int, delay: int, pool: str | None
) -> None:
    """Bring one dead job of NS/QUEUE back to ready."""
    query = {"pool": pool, "ttl": ttl, "tries": tries, "delay": delay}
    answer = cli.client.call("PUT", path("deadletter", ns, queue, "job", job_id), query)
    cli.show(answer, lambda _: f"respawned {job_id}")


@command("deadletter-delete-job", "ns", "queue", "job_id")
@pool_option
def deadletter_delete_job(cli: Cli, ns: str, queue: str, job_id: str, pool: str | None) -> None:
    """Delete one dead job of NS/QUEUE for good."""
    answer = cli.client.call("DELETE", path("deadletter", ns, queue, "job", job_id), {"pool": pool})
    cli.show(answer, lambda _: f"deleted {job_id}")


@command("pause", "ns", "queue")
@pool_option
def pause(cli: Cli, ns: str, queue: str, pool: str | None) -> None:
    """Stop delivering the jobs of NS/QUEUE (publishes and timers go on) until `resume`."""
    _pause(cli, ns, queue, pool, paused=True)


@command("resume", "ns", "queue")
@pool_option
def resume(cli: Cli, ns: str, queue: str, pool: str | None) -> None:
    """Deliver the jobs of NS/QUEUE again."""
    _pause(cli, ns, queue, pool, paused=False)


def _pause(cli: Cli, ns: str, queue: str, pool: str | None, paused: bool) -> None:
    """PUT .../pause pauses the queue, DELETE resumes it."""
    answer = cli.client.call("PUT" if paused else "DELETE", path("queues", ns, queue, "pause"), {"pool": pool})
    cli.show(answer, lambda _: f"{'paused' if paused else 'resumed'} {ns}/{queue}")
