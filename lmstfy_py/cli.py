"""The `lmstfy-py` command: `serve` and `version`.

Every start-up problem an operator can fix (config file, flags, ports, the embedded Redis)
ends as one line `lmstfy-py: error: ...` and exit code 2, never a traceback. An embedded Redis
that dies and cannot be restarted stops the server: one such line and exit code 1.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import NoReturn

import click

from lmstfy_py import __version__
from lmstfy_py.config import Config, ConfigError, load_config
from lmstfy_py.store.embedded import EmbeddedRedis, EmbeddedRedisError
from lmstfy_py.store.embedded_watcher import RedisLostError, RedisWatcher
from lmstfy_py.token_cli import token as token_cli
from lmstfy_py.worker.command import worker as worker_command

USAGE_ERROR = 2
RUNTIME_ERROR = 1


@click.group()
def main() -> None:
    """lmstfy-py: an lmstfy-compatible job-queue server on Redis."""


main.add_command(token_cli)
main.add_command(worker_command)


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
@click.option(
    "--fsync",
    metavar="POLICY",
    help="When the embedded Redis fsyncs its append-only file: everysec or always.  [default: always]",
)
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
    fsync: str | None,
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
            fsync=fsync,
        )
        if access_log is not None:
            config = replace(config, server=replace(config.server, access_log=access_log))
        listeners = sockets.open_listeners(config.server)
        try:
            with _redis(config, server.stop_from_another_thread) as (config, redis):
                _announce(server.startup_line(config, listeners, redis), server.exposure_warning(config, listeners))
                code = server.run(config, listeners)
        finally:
            listeners.close()
    except (ConfigError, EmbeddedRedisError, sockets.ListenError) as exc:
        _fail(str(exc))
    except RedisLostError as exc:
        _fail(str(exc), RUNTIME_ERROR)
    except KeyboardInterrupt:
        code = 0  # a stop asked for before (or after) the event loop ran: not an error
    sys.exit(code)


@contextlib.contextmanager
def _redis(config: Config, stop_server: Callable[[], None]) -> Iterator[tuple[Config, str]]:
    """The config to serve with and a description of its Redis; starts the embedded one if needed.

    The embedded one is watched while the server runs: restarted when it dies, and when it
    cannot be, `stop_server` is called and RedisLostError raised once the server stopped.
    """
    if not config.embedded:
        yield config, "pools " + ", ".join(sorted(config.pools)) + f" (admin pool {config.admin_pool})"
        return
    embedded = EmbeddedRedis(config.server.data_dir, fsync=config.server.fsync)
    url = embedded.start_sync()
    # The Redis dies with the thread that forked it (see store/embedded.py): this one was forked
    # by the main thread, restarts are by the watcher's; both live until watcher.stop().
    watcher = RedisWatcher(embedded, stop_server)
    watcher.start()
    try:
        yield config.with_embedded(url), f"embedded in {embedded.data_dir} (fsync {embedded.fsync})"
    except KeyboardInterrupt:
        if watcher.failure is None:
            raise
    finally:
        watcher.stop()
    if watcher.failure is not None:
        raise RedisLostError(watcher.failure)


def _announce(line: str, warning: str | None) -> None:
    print(line, file=sys.stderr, flush=True)
    if warning:
        print(warning, file=sys.stderr, flush=True)


def _fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    print(f"lmstfy-py: error: {message}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
