"""The `lmstfy-py` command: `serve` and `version`.

Every start-up problem an operator can fix (config file, flags, ports, the embedded Redis)
ends as one line `lmstfy-py: error: ...` and exit code 2, never a traceback. An embedded Redis
that dies and cannot be restarted stops the server: one such line and exit code 1.

`serve` also takes lmstfy's own flags, spelled as Go's flag package reads them (`-c FILE`,
`-c=FILE`, `--c FILE`): `-c` config file (lmstfy's or ours), `-p` pid file, `-v` version,
`-bt` backtrack level, `-sv` no token checks; and `lmstfy-py -c lmstfy.toml ...` without
`serve` is `serve` (the command line of an lmstfy service, with only the program swapped).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import click

from lmstfy_py import SKIP_TOKEN_CHECK_WARNING, __version__, build_info, logs
from lmstfy_py.config import LOG_LEVELS, Config, ConfigError, load_config
from lmstfy_py.store.embedded import EmbeddedRedis, EmbeddedRedisError
from lmstfy_py.store.embedded_watcher import RedisLostError, RedisWatcher
from lmstfy_py.token_cli import token as token_cli
from lmstfy_py.worker.command import worker as worker_command

USAGE_ERROR = 2
RUNTIME_ERROR = 1
# lmstfy's flags (Go's flag package: one or two dashes, `-name value` or `-name=value`).
LMSTFY_VALUE_FLAGS = ("c", "p", "bt")
LMSTFY_BOOL_FLAGS = ("v", "sv")
log = logging.getLogger("lmstfy_py.cli")  # __name__ is "__main__" under python -m


def go_flags(args: Sequence[str]) -> list[str]:
    """lmstfy's flags as click reads them: `--c x` and `-c=x` become `-c x`, `-sv=true` `-sv`."""
    found: list[str] = []
    for arg in args:
        if arg == "--":
            found += args[len(found) :]
            break
        name, equals, value = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in (*LMSTFY_VALUE_FLAGS, *LMSTFY_BOOL_FLAGS):
            found.append(arg)
        elif name in LMSTFY_VALUE_FLAGS:
            found += [f"-{name}", value] if equals else [f"-{name}"]
        elif not equals or value.lower() in ("1", "t", "true"):
            found.append(f"-{name}")
    return found


class _Main(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # lmstfy's command line (`lmstfy -c lmstfy.toml -p lmstfy.pid`) means `serve`.
        if args and args[0].lstrip("-").partition("=")[0] in (*LMSTFY_VALUE_FLAGS, *LMSTFY_BOOL_FLAGS):
            args = ["serve", *args]
        return super().parse_args(ctx, args)


class _Serve(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, go_flags(args))


@click.group(cls=_Main)
def main() -> None:
    """lmstfy-py: an lmstfy-compatible job-queue server on Redis."""


main.add_command(token_cli)
main.add_command(worker_command)


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"lmstfy-py {__version__}")


@main.command(cls=_Serve)
@click.option(
    "-c", "--config", "config_path", metavar="FILE", help="TOML config file, ours or lmstfy's; flags override it."
)
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
@click.option(
    "--http-server",
    metavar="NAME",
    help="The HTTP server of every worker: uvicorn (the [fast] extra) or hypercorn.  [default: uvicorn if installed]",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Export the spans of traced jobs over OTLP/HTTP to URL/v1/traces (the [otel] extra).  [default: off]",
)
@click.option("--access-log/--no-access-log", default=None, help="Log every request.  [default: off]")
@click.option("-p", "--pid-file", metavar="FILE", help="Write the server's pid there; removed at exit.")
@click.option(
    "-bt",
    "--backtrack-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="Log lines this severe or worse name their source (bt_line, bt_func).  [default: warn in lmstfy's formats]",
)
@click.option(
    "-sv",
    "--skip-verification",
    is_flag=True,
    help="Development only: /api requests need no valid token.",
)
@click.option("-v", "show_version", is_flag=True, help="Print the version as lmstfy does, and exit.")
def serve(config_path: str | None, pid_file: str | None, show_version: bool, **flags: Any) -> None:
    """Run the server until SIGTERM or Ctrl-C."""
    if show_version:
        info = build_info()
        click.echo(f"version: {info['version']}\nbuilt at: {info['build_date']}\ncommit: {info['build_commit']}")
        return
    # Imported here so `lmstfy-py version`, `--help` and `token` stay instant: redis-py alone takes
    # 0.4-0.6 s to import, which each token-cli command paid. redis_import first (see there).
    import lmstfy_py.redis_import  # noqa: F401
    from lmstfy_py import listeners as sockets
    from lmstfy_py import server

    # From now on a SIGTERM unwinds like Ctrl-C, so the embedded Redis is always stopped.
    server.sigterm_interrupts()
    say: Callable[[str], None] | None = None  # set once the server serves: it then says when it stopped
    try:
        config = _config(config_path, **flags)
        logs.setup(config.log)
        listeners = sockets.open_listeners(config.server)
        try:
            with _redis(config, server.stop_from_another_thread) as (config, redis), _pid_file(pid_file):
                warnings = [*config.warnings, server.exposure_warning(config, listeners)]
                if config.server.skip_token_check:
                    warnings.append(SKIP_TOKEN_CHECK_WARNING)
                _announce(config, server.startup_line(config, listeners, redis), warnings)
                say = functools.partial(_say, config)
                code = server.run(config, listeners, announce=say)
        finally:
            listeners.close()
    except (ConfigError, EmbeddedRedisError, sockets.ListenError, logs.LogSetupError, PidFileError) as exc:
        _fail(str(exc))
    except RedisLostError as exc:
        _fail(str(exc), RUNTIME_ERROR)
    except KeyboardInterrupt:
        code = 0  # a stop asked for before (or after) the event loop ran: not an error
    if say is not None:  # once the embedded Redis and the pid file are gone too
        say("lmstfy-py: stopped" if code == 0 else f"lmstfy-py: stopped with exit code {code}")
    sys.exit(code)


def _config(
    config_path: str | None,
    *,
    access_log: bool | None,
    backtrack_level: str | None,
    skip_verification: bool,
    **flags: Any,
) -> Config:
    """The config file with the command line's flags applied."""
    config = load_config(config_path, **flags)
    server = replace(config.server, skip_token_check=skip_verification)
    if access_log is not None:
        server = replace(server, access_log=access_log)
    # lmstfy's -bt defaults to warn; our own plain lines name no source unless asked.
    backtrack = backtrack_level or (None if config.log.format == "plain" else "warn")
    return replace(config, server=server, log=replace(config.log, backtrack=backtrack and backtrack.lower()))


class PidFileError(Exception):
    """The pid file cannot be written: one line for the operator."""


@contextlib.contextmanager
def _pid_file(path: str | None) -> Iterator[None]:
    """The server's pid in `path` while it runs (lmstfy's -p); removed at exit if it is still ours."""
    if path is None:
        yield
        return
    pid = str(os.getpid())
    try:
        Path(path).write_text(pid)  # lmstfy's content: the pid, no newline
    except OSError as exc:
        raise PidFileError(f"cannot write the pid file {path}: {exc.strerror or exc}") from exc
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if Path(path).read_text() == pid:  # another server may have taken the name since
                os.remove(path)


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
    # by the main thread, restarts are by the watcher's; both live until the watcher is left.
    with RedisWatcher(embedded, stop_server, hang_s=config.server.redis_hang_timeout) as watcher:
        try:
            yield config.with_embedded(url), f"embedded in {embedded.data_dir} (fsync {embedded.fsync})"
        except KeyboardInterrupt:
            if watcher.failure is None:
                raise
    if watcher.failure is not None:
        raise RedisLostError(watcher.failure)


def _announce(config: Config, line: str, warnings: Sequence[str | None]) -> None:
    """The start-up line and the warnings: printed on stderr, and logged when the log is elsewhere
    (LogDir) or in lmstfy's formats, so that error.log and JSON readers have them too."""
    for text, level in ((line, logging.INFO), *((w, logging.WARNING) for w in warnings if w)):
        _say(config, text, level)


def _say(config: Config, text: str, level: int = logging.INFO) -> None:
    """One line of the server's own (start-up, warnings, stop) as _announce says them."""
    if config.log.format == "plain" or config.log.dir is not None:
        prefix = "lmstfy-py: warning: " if level == logging.WARNING and not text.startswith("lmstfy-py") else ""
        print(prefix + text, file=sys.stderr, flush=True)
    if config.log.format != "plain" or config.log.dir is not None:
        # stacklevel: lmstfy's -bt names the function that said the line (_announce, the stop's), not this helper.
        log.log(level, text.removeprefix("lmstfy-py: warning: "), stacklevel=2)


def _fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    print(f"lmstfy-py: error: {message}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
