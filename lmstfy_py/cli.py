"""The `lmstfy-py` command: `serve` and `version`.

Every start-up problem an operator can fix (config file, flags, ports, the embedded Redis)
ends as one line `lmstfy-py: error: ...` and exit code 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import NoReturn

import click

from lmstfy_py import __version__
from lmstfy_py.config import Config, ConfigError, load_config
from lmstfy_py.store.embedded import EmbeddedRedis, EmbeddedRedisError
from lmstfy_py.token_cli import token as token_cli

USAGE_ERROR = 2


@click.group()
def main() -> None:
    """lmstfy-py: an lmstfy-compatible job-queue server on Redis."""


main.add_command(token_cli)


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"lmstfy-py {__version__}")


@main.command()
@click.option("--config", "config_path", metavar="FILE", help="TOML config file; flags override it.")
@click.option("--host", help="Data API address.  [default: 0.0.0.0]")
@click.option("--port", type=int, help="Data API port.  [default: 7777]")
@click.option("--admin-host", help="Admin API address.  [default: 127.0.0.1]")
@click.option("--admin-port", type=int, help="Admin API port.  [default: 7778]")
@click.option("--data-dir", metavar="DIR", help="Embedded Redis data directory.  [default: ./lmstfy-data]")
@click.option("--redis-url", metavar="URL", help="Use this external Redis instead of the embedded one.")
@click.option("--workers", type=int, help="Server processes.  [default: the number of CPUs]")
@click.option("--access-log/--no-access-log", default=None, help="Log every request to stdout.  [default: off]")
def serve(
    config_path: str | None,
    host: str | None,
    port: int | None,
    admin_host: str | None,
    admin_port: int | None,
    data_dir: str | None,
    redis_url: str | None,
    workers: int | None,
    access_log: bool | None,
) -> None:
    """Run the server until SIGTERM or Ctrl-C."""
    # Imported here so `lmstfy-py version` and `--help` stay instant.
    from lmstfy_py import listeners as sockets
    from lmstfy_py import server

    # From now on a SIGTERM unwinds like Ctrl-C, so the embedded Redis is always stopped.
    server.sigterm_interrupts()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(
            config_path,
            host=host,
            port=port,
            admin_host=admin_host,
            admin_port=admin_port,
            data_dir=data_dir,
            workers=workers,
            redis_url=redis_url,
        )
        if access_log is not None:
            config = replace(config, server=replace(config.server, access_log=access_log))
        listeners = sockets.open_listeners(config.server)
        try:
            with _redis(config) as (config, redis):
                _announce(server.startup_line(config, listeners, redis), server.exposure_warning(config, listeners))
                code = server.run(config, listeners)
        finally:
            listeners.close()
    except (ConfigError, EmbeddedRedisError, sockets.ListenError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        code = 0  # a stop asked for before (or after) the event loop ran: not an error
    sys.exit(code)


@contextlib.contextmanager
def _redis(config: Config) -> Iterator[tuple[Config, str]]:
    """The config to serve with and a description of its Redis; starts the embedded one if needed."""
    if not config.embedded:
        yield config, "pools " + ", ".join(sorted(config.pools)) + f" (admin pool {config.admin_pool})"
        return
    embedded = EmbeddedRedis(config.server.data_dir)
    url = embedded.start_sync()
    try:
        yield config.with_embedded(url), f"embedded in {embedded.data_dir}"
    finally:
        embedded.stop_sync()


def _announce(line: str, warning: str | None) -> None:
    print(line, file=sys.stderr, flush=True)
    if warning:
        print(warning, file=sys.stderr, flush=True)


def _fail(message: str) -> NoReturn:
    print(f"lmstfy-py: error: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


if __name__ == "__main__":
    main()
