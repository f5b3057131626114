"""Configuration: one TOML file (plus a few command-line flags) -> frozen dataclasses.

Everything is validated here, once, so the rest of the server can trust a `Config` it is
handed. Every problem becomes a `ConfigError` whose text is one line naming the file, the
section, the key and what is wrong, because that line is all an operator sees when the
server refuses to start.

Layout (see deploy/lmstfy.toml for every key with its meaning):

    [server]            ServerConfig
    [defaults]          Defaults
    [pools.<name>]      PoolConfig, one table per pool; none at all = the embedded Redis
    [admin]             pool = "<name>" (where tokens and limits live)
    [admin.accounts]    user = "password" (admin API basic auth)
    [admin.readonly_accounts]  user = "password" (the same, reading only)
    [push]              PushConfig: which networks push endpoints may reach
    [log]               LogConfig: level, dir, format
    [tracing]           TracingConfig: otlp_endpoint, service_name (span export, SPEC 15)

lmstfy's own config file (PascalCase keys: Host, Port, [Pool.default], ...) is recognised and
mapped onto the same dataclasses by config/lmstfy.py; what in it means nothing here becomes a
warning in `Config.warnings`, printed once at start.

This package: model.py (the dataclasses), reader.py (typed values out of a table), sections.py
(each section of our layout checked), lmstfy.py (lmstfy's layout translated into ours); here
only the file is read and dispatched, and the command-line flags applied.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lmstfy_py.config import lmstfy, model
from lmstfy_py.config.model import *  # noqa: F403  # the dataclasses and names, as lmstfy_py.config's
from lmstfy_py.config.model import COMMAND_LINE, DEFAULT_POOL, Config
from lmstfy_py.config.reader import Reader, read_toml
from lmstfy_py.config.sections import parse_document, read_pool, read_server, read_tracing

__all__ = ["load_config", "parse_document"]
__all__ += model.__all__


def load_config(
    path: str | Path | None,
    *,
    host: str | None = None,
    port: int | None = None,
    admin_host: str | None = None,
    admin_port: int | None = None,
    data_dir: str | Path | None = None,
    workers: int | None = None,
    redis_url: str | None = None,
    fsync: str | None = None,
    http_server: str | None = None,
    otlp_endpoint: str | None = None,
) -> Config:
    """Read the TOML file at `path` (None: built-in defaults), then apply command-line flags.

    A flag left at None is not given. `redis_url` replaces every configured pool with one
    standalone `default` pool at that URL (and makes it the admin pool).
    """
    config = _read_file(path) if path is not None else Config()
    flags = {"host": host, "port": port, "admin_host": admin_host, "admin_port": admin_port, "workers": workers}
    flags["fsync"] = fsync
    flags["http_server"] = http_server
    flags["data_dir"] = str(data_dir) if data_dir is not None else None
    given = {key: value for key, value in flags.items() if value is not None}
    if given:
        config = replace(config, server=read_server(Reader(COMMAND_LINE, None, given, _flag_name), config.server))
    if redis_url is not None:
        pool = read_pool(DEFAULT_POOL, Reader(COMMAND_LINE, None, {"url": redis_url}, _flag_name))
        config = replace(config, pools={DEFAULT_POOL: pool}, admin_pool=DEFAULT_POOL)
    if otlp_endpoint is not None:
        reader = Reader(COMMAND_LINE, None, {"otlp_endpoint": otlp_endpoint}, _flag_name)
        config = replace(config, tracing=read_tracing(reader, config.tracing))
    return config


def _read_file(path: str | Path) -> Config:
    """Our own TOML file, or lmstfy's (recognised by its keys), as a Config."""
    document = read_toml(path)
    if lmstfy.is_lmstfy_document(document):
        return lmstfy.parse(str(path), document)
    return parse_document(str(path), document)


def _flag_name(key: str) -> str:
    return "--redis-url" if key == "url" else "--" + key.replace("_", "-")
