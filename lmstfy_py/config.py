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
    [push]              PushConfig: which networks push endpoints may reach
    [log]               LogConfig: level, dir, format

lmstfy's own config file (PascalCase keys: Host, Port, [Pool.default], ...) is recognised and
mapped onto the same dataclasses by lmstfy_config.py; what in it means nothing here becomes a
warning in `Config.warnings`, printed once at start.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn, cast
from urllib.parse import urlsplit

UINT32_MAX = 2**32 - 1
UINT16_MAX = 2**16 - 1
MAX_CONSUME_TIMEOUT = 600
MAX_CONNECTION_TIMEOUT = 3600  # seconds: the largest body_timeout, keep_alive_timeout, redis_hang_timeout
NAME_RE = re.compile(r"[-_A-Za-z0-9]+")
# A name or IPv4 address, or an IPv6 address in brackets: what a `Host` header holds before its port.
HOST_NAME_RE = re.compile(r"[-.A-Za-z0-9]+|\[[0-9A-Fa-f:.]+\]")
DEFAULT_POOL = "default"
POOL_KINDS = ("standalone", "sentinel", "cluster")
URL_SCHEMES = ("redis", "rediss", "unix")
COMMAND_LINE = "command line"
# The embedded Redis's appendfsync: "no" (the kernel writes back when it likes) is not offered.
FSYNC_POLICIES = ("everysec", "always")

PoolKind = Literal["standalone", "sentinel", "cluster"]
# What lmstfy left in the Redis is served in place (SPEC section 12) with "lmstfy"; with "auto"
# when it is found at start (a cluster pool never looks); never with "lmstfy-py".
PoolFormat = Literal["auto", "lmstfy-py", "lmstfy"]
POOL_FORMATS = ("auto", "lmstfy-py", "lmstfy")
FsyncPolicy = Literal["everysec", "always"]
# The HTTP server of every worker: hypercorn (the default), or uvicorn with httptools (the [fast] extra).
HttpServer = Literal["hypercorn", "uvicorn"]
HTTP_SERVERS = ("hypercorn", "uvicorn")
# What each server needs beyond the core dependencies, and where it comes from.
_HTTP_SERVER_MODULES = {"hypercorn": (), "uvicorn": ("uvicorn", "httptools")}
# "plain": lmstfy-py's own lines; "text" and "json": logrus's formatters, as lmstfy writes its logs.
LogFormat = Literal["plain", "text", "json"]
LOG_FORMATS = ("plain", "text", "json")
# logrus's level names (lmstfy's LogLevel and -bt), most severe first.
LOG_LEVELS = ("panic", "fatal", "error", "warn", "warning", "info", "debug", "trace")


class ConfigError(Exception):
    """A configuration problem, rendered as one line: `file: [section] key: problem`."""

    def __init__(self, source: str, problem: str, section: str | None = None, key: str | None = None) -> None:
        self.source = source
        self.section = section
        self.key = key
        # The message must stay one line: TOML parser messages and OS errors are folded.
        self.problem = " ".join(problem.split())
        super().__init__(str(self))

    def __str__(self) -> str:
        where = " ".join(part for part in (f"[{self.section}]" if self.section else "", self.key or "") if part)
        return f"{self.source}: {where}: {self.problem}" if where else f"{self.source}: {self.problem}"


@dataclass(frozen=True)
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 7777
    admin_host: str = "127.0.0.1"
    admin_port: int = 7778
    # One process per core: one Python process serves about one core's worth of requests.
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    data_dir: str = "./lmstfy-data"
    access_log: bool = False
    # Seconds a request's whole body may take to arrive, counted from its head (408 after).
    body_timeout: int = 30
    # Seconds a connection may wait for a request's head: idle keep-alive time, and a slow head.
    keep_alive_timeout: int = 5
    # When the embedded Redis fsyncs its append-only file: once a second, or before each reply.
    # `always`: a publish answered 201 survives even a killed Redis on a busy disk (docs/API.md, Durability).
    fsync: FsyncPolicy = "always"
    # Seconds the embedded Redis may answer nothing at all (frozen, not dead) before it is killed
    # and restarted (store/embedded_watcher.py).
    redis_hang_timeout: int = 30
    # lmstfy's -sv (a flag only, never from a file): /api requests need no valid token. Development only.
    skip_token_check: bool = False
    # The HTTP server; both keep every promise of docs/API.md ("Connections"), uvicorn costs less per request.
    http_server: HttpServer = "hypercorn"
    # Recurring jobs: at most this many schedules in one namespace, none firing more often than
    # every `min_schedule_every` seconds (one tenant's schedules must not take the server's CPU).
    max_schedules_per_namespace: int = 1000
    min_schedule_every: int = 1


@dataclass(frozen=True)
class LogConfig:
    """Where log lines go and how they look (logs.py)."""

    level: str = "info"  # one of LOG_LEVELS
    # None: the access log on stdout, the rest on stderr; else access.log and error.log in it.
    dir: str | None = None
    format: LogFormat = "plain"
    # lmstfy's -bt (a flag only): lines this severe or worse name their source (bt_line, bt_func).
    backtrack: str | None = None


@dataclass(frozen=True)
class Defaults:
    """Values a request gets for parameters it leaves out (seconds, except tries)."""

    ttl: int = 86400
    delay: int = 0
    tries: int = 1
    ttr: int = 120
    timeout: int = 0


@dataclass(frozen=True)
class PoolConfig:
    name: str
    kind: PoolKind = "standalone"
    url: str | None = None
    master_name: str | None = None
    sentinels: tuple[str, ...] = ()
    sentinel_password: str | None = None
    password: str | None = None
    db: int = 0
    cluster_nodes: tuple[str, ...] = ()
    migrate_to: str | None = None
    format: PoolFormat = "auto"


IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class PushConfig:
    """What push endpoints may reach (push/delivery.py checks every connect, after DNS)."""

    # None: any address, as lmstfy; else only addresses inside one of these networks.
    allowed_networks: tuple[IpNetwork, ...] | None = None


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    defaults: Defaults = field(default_factory=Defaults)
    # Empty means "no external Redis": the server starts its embedded one (see with_embedded).
    pools: dict[str, PoolConfig] = field(default_factory=dict)
    admin_pool: str = DEFAULT_POOL
    accounts: dict[str, str] = field(default_factory=dict)
    # With accounts, GET /metrics needs them too unless this is set (a Prometheus without credentials).
    metrics_public: bool = False
    log: LogConfig = field(default_factory=LogConfig)
    # Host names the admin port answers besides loopback names and the addresses it is bound to
    # (a DNS-rebinding page gets 421): [admin] allowed_hosts.
    admin_allowed_hosts: tuple[str, ...] = ()
    push: PushConfig = field(default_factory=PushConfig)
    # What the file said that means nothing here (an lmstfy config file's keys): told once at start.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def embedded(self) -> bool:
        """True when no pool is configured and the embedded Redis must be started."""
        return not self.pools

    def with_embedded(self, url: str) -> Config:
        """This config with the embedded Redis at `url` as its only pool, `default`."""
        return replace(self, pools={DEFAULT_POOL: PoolConfig(DEFAULT_POOL, url=url)}, admin_pool=DEFAULT_POOL)


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
        config = replace(config, server=_read_server(_Reader(COMMAND_LINE, None, given, _flag_name), config.server))
    if redis_url is not None:
        pool = _read_pool(DEFAULT_POOL, _Reader(COMMAND_LINE, None, {"url": redis_url}, _flag_name))
        config = replace(config, pools={DEFAULT_POOL: pool}, admin_pool=DEFAULT_POOL)
    return config


def _read_file(path: str | Path) -> Config:
    """Our own TOML file, or lmstfy's (recognised by its keys), as a Config."""
    # Imported here: lmstfy_config builds on this module's readers.
    from lmstfy_py import lmstfy_config

    document = _read_toml(path)
    if lmstfy_config.is_lmstfy_document(document):
        return lmstfy_config.parse(str(path), document)
    return parse_document(str(path), document)


def _flag_name(key: str) -> str:
    return "--redis-url" if key == "url" else "--" + key.replace("_", "-")


def _read_toml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise ConfigError(source, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"not UTF-8 text (byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        # tomllib puts the position at the end, "(at line 3, column 7)"; lead with it instead.
        found = re.fullmatch(r"(.*) \(at (.+)\)", str(exc), re.DOTALL)
        problem = f"invalid TOML at {found[2]}: {found[1]}" if found else f"invalid TOML: {exc}"
        raise ConfigError(source, problem) from exc


class _Reader:
    """Takes typed, range-checked values out of one table and complains about leftovers."""

    def __init__(
        self, source: str, section: str | None, table: Mapping[str, Any], label: Callable[[str], str] = str
    ) -> None:
        self.source = source
        self.section = section
        self.table = table
        self.label = label
        self.used: set[str] = set()

    def fail(self, key: str | None, problem: str) -> NoReturn:
        raise ConfigError(self.source, problem, self.section, self.label(key) if key else None)

    def take(self, key: str) -> Any:
        """The raw value of `key` (None when absent), marking the key as known."""
        self.used.add(key)
        return self.table.get(key)

    def string(self, key: str, default: str | None = None, *, empty_ok: bool = False) -> str | None:
        value = self.take(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {_toml_type(value)}")
        if not value and not empty_ok:
            self.fail(key, "must not be empty")
        return value

    def required_string(self, key: str, default: str) -> str:
        value = self.string(key, default)
        assert value is not None  # a default was given
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.take(key)
        if value is None:
            return default
        # bool is an int in Python but never a valid number in a config file.
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, f"expected an integer, got {_toml_type(value)}")
        if not low <= value <= high:
            self.fail(key, f"must be between {low} and {high}, got {value}")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.required_string(key, default)
        if value not in choices:
            expected = " or ".join(f'"{choice}"' for choice in choices)
            self.fail(key, f'expected {expected}, got "{value}"')
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.take(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {_toml_type(value)}")
        return value

    def addresses(self, key: str) -> tuple[str, ...]:
        value = self.take(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.fail(key, f'expected an array of "host:port" strings, got {_toml_type(value)}')
        for item in value:
            if not _is_host_port(item):
                self.fail(key, f'expected "host:port" with a port 1..65535, got "{item}"')
        return tuple(value)

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            self.fail(unknown[0], "unknown key")


def _toml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array"}
    return "a table" if isinstance(value, dict) else names.get(type(value), type(value).__name__)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host.strip("[]")) and port.isdigit() and 1 <= int(port) <= UINT16_MAX


_SECTIONS = ("server", "defaults", "pools", "admin", "log", "push")


def parse_document(source: str, document: Mapping[str, Any]) -> Config:
    """A document in our layout (a parsed TOML file) as a Config; ConfigError names what is wrong."""
    for name, value in document.items():
        if name not in _SECTIONS:
            raise ConfigError(source, f"unknown section [{name}] (known: {', '.join(_SECTIONS)})")
        if not isinstance(value, dict):
            raise ConfigError(source, f"[{name}] must be a table, got {_toml_type(value)}")
    server = _read_server(_Reader(source, "server", document.get("server", {})), ServerConfig())
    defaults = _read_defaults(_Reader(source, "defaults", document.get("defaults", {})))
    pools = _read_pools(source, document.get("pools", {}))
    admin = _read_admin(source, document.get("admin", {}), pools)
    log = _read_log(_Reader(source, "log", document.get("log", {})))
    push = _read_push(_Reader(source, "push", document.get("push", {})))
    return Config(
        server,
        defaults,
        pools,
        admin.pool,
        admin.accounts,
        admin.metrics_public,
        log,
        admin_allowed_hosts=admin.allowed_hosts,
        push=push,
    )


def _read_push(reader: _Reader) -> PushConfig:
    value = reader.take("allowed_networks")
    reader.finish()
    if value is None:
        return PushConfig()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        reader.fail("allowed_networks", f'expected an array of CIDR strings like "10.0.0.0/8", got {_toml_type(value)}')
    networks: list[IpNetwork] = []
    for item in value:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            reader.fail("allowed_networks", f'expected a network like "10.0.0.0/8" or "::1/128", got "{item}"')
    return PushConfig(allowed_networks=tuple(networks))


def _read_log(reader: _Reader) -> LogConfig:
    level = reader.choice("level", LogConfig.level, LOG_LEVELS)
    log_dir = reader.string("dir")
    log_format = cast(LogFormat, reader.choice("format", LogConfig.format, LOG_FORMATS))
    reader.finish()
    return LogConfig(level=level, dir=log_dir, format=log_format)


def _read_server(reader: _Reader, base: ServerConfig) -> ServerConfig:
    server = ServerConfig(
        host=reader.required_string("host", base.host),
        port=reader.integer("port", base.port, 1, UINT16_MAX),
        admin_host=reader.required_string("admin_host", base.admin_host),
        admin_port=reader.integer("admin_port", base.admin_port, 1, UINT16_MAX),
        workers=reader.integer("workers", base.workers, 1, 256),
        data_dir=reader.required_string("data_dir", base.data_dir),
        access_log=reader.boolean("access_log", base.access_log),
        body_timeout=reader.integer("body_timeout", base.body_timeout, 1, MAX_CONNECTION_TIMEOUT),
        keep_alive_timeout=reader.integer("keep_alive_timeout", base.keep_alive_timeout, 1, MAX_CONNECTION_TIMEOUT),
        fsync=cast(FsyncPolicy, reader.choice("fsync", base.fsync, FSYNC_POLICIES)),
        redis_hang_timeout=reader.integer("redis_hang_timeout", base.redis_hang_timeout, 1, MAX_CONNECTION_TIMEOUT),
        http_server=cast(HttpServer, reader.choice("http_server", base.http_server, HTTP_SERVERS)),
        max_schedules_per_namespace=reader.integer(
            "max_schedules_per_namespace", base.max_schedules_per_namespace, 1, UINT32_MAX
        ),
        min_schedule_every=reader.integer("min_schedule_every", base.min_schedule_every, 1, UINT32_MAX),
    )
    reader.finish()
    if server.port == server.admin_port:
        reader.fail("admin_port", f"must differ from port ({server.port})")
    missing = [name for name in _HTTP_SERVER_MODULES[server.http_server] if importlib.util.find_spec(name) is None]
    if missing:
        needs = ", ".join(missing)
        reader.fail(
            "http_server", f"{server.http_server} needs {needs}: the [fast] extra (pip install '.[fast]' in a checkout)"
        )
    return server


def _read_defaults(reader: _Reader) -> Defaults:
    base = Defaults()
    defaults = Defaults(
        ttl=reader.integer("ttl", base.ttl, 0, UINT32_MAX),
        delay=reader.integer("delay", base.delay, 0, UINT32_MAX),
        tries=reader.integer("tries", base.tries, 1, UINT16_MAX),
        ttr=reader.integer("ttr", base.ttr, 1, UINT32_MAX),
        timeout=reader.integer("timeout", base.timeout, 0, MAX_CONSUME_TIMEOUT),
    )
    reader.finish()
    # A publish relying on both defaults would otherwise be refused: the job would expire unborn.
    if 0 < defaults.ttl < defaults.delay:
        reader.fail("delay", f"must not exceed ttl ({defaults.ttl}) unless ttl is 0")
    return defaults


def _read_pools(source: str, table: dict[str, Any]) -> dict[str, PoolConfig]:
    pools: dict[str, PoolConfig] = {}
    for name, value in table.items():
        section = f"pools.{name}"
        if not NAME_RE.fullmatch(name):
            raise ConfigError(source, "pool names may use only letters, digits, '-' and '_'", section)
        if not isinstance(value, dict):
            raise ConfigError(source, f"expected a table, got {_toml_type(value)}", section)
        pools[name] = _read_pool(name, _Reader(source, section, value))
    if pools and DEFAULT_POOL not in pools:
        raise ConfigError(source, f"a [pools.{DEFAULT_POOL}] table is required when any pool is configured")
    for pool in pools.values():
        if pool.migrate_to is not None and (pool.migrate_to == pool.name or pool.migrate_to not in pools):
            raise ConfigError(source, "must name another configured pool", f"pools.{pool.name}", "migrate_to")
    return pools


# Which keys each kind needs, and which keys belong to one kind only (a typo'd kind would
# otherwise silently ignore half of the table).
_REQUIRED = {"standalone": ("url",), "sentinel": ("master_name", "sentinels"), "cluster": ("cluster_nodes",)}
_ONLY_FOR = {
    "url": "standalone",
    "master_name": "sentinel",
    "sentinels": "sentinel",
    "sentinel_password": "sentinel",
    "cluster_nodes": "cluster",
}


def _read_pool(name: str, reader: _Reader) -> PoolConfig:
    kind = reader.required_string("kind", "standalone")
    if kind not in POOL_KINDS:
        reader.fail("kind", f'expected one of {", ".join(POOL_KINDS)}, got "{kind}"')
    pool = PoolConfig(
        name=name,
        kind=cast(PoolKind, kind),
        url=reader.string("url"),
        master_name=reader.string("master_name"),
        sentinels=reader.addresses("sentinels"),
        sentinel_password=reader.string("sentinel_password", empty_ok=True),
        password=reader.string("password", empty_ok=True),
        db=reader.integer("db", 0, 0, 2**31 - 1),
        cluster_nodes=reader.addresses("cluster_nodes"),
        migrate_to=reader.string("migrate_to"),
        format=cast(PoolFormat, reader.choice("format", "auto", POOL_FORMATS)),
    )
    reader.finish()
    _check_pool_kind(pool, reader)
    return pool


def _check_pool_kind(pool: PoolConfig, reader: _Reader) -> None:
    if pool.format == "lmstfy" and pool.kind == "cluster":
        reader.fail("format", "lmstfy never ran on a Redis Cluster: an lmstfy-format pool is standalone or sentinel")
    for key in _REQUIRED[pool.kind]:
        if not getattr(pool, key):
            reader.fail(key, f"required for a {pool.kind} pool")
    for key, kind in _ONLY_FOR.items():
        if getattr(pool, key) and kind != pool.kind:
            reader.fail(key, f"only used by a {kind} pool, this one is {pool.kind}")
    if pool.kind == "cluster" and pool.db != 0:
        reader.fail("db", "a Redis Cluster has only db 0")
    if pool.url is not None:
        _check_url(pool.url, reader)


def _check_url(url: str, reader: _Reader) -> None:
    parts = urlsplit(url)
    if parts.scheme not in URL_SCHEMES:
        reader.fail("url", f'expected a redis://, rediss:// or unix:// URL, got "{url}"')
    if parts.scheme == "unix" and not parts.path:
        reader.fail("url", f'a unix:// URL needs a socket path, got "{url}"')
    if parts.scheme != "unix" and not parts.hostname:
        reader.fail("url", f'the URL needs a host, got "{url}"')


@dataclass(frozen=True)
class _AdminSection:
    pool: str
    accounts: dict[str, str]
    metrics_public: bool
    allowed_hosts: tuple[str, ...]


def _read_admin(source: str, table: dict[str, Any], pools: dict[str, PoolConfig]) -> _AdminSection:
    reader = _Reader(source, "admin", table)
    admin_pool = reader.required_string("pool", DEFAULT_POOL)
    accounts = reader.take("accounts")
    metrics_public = reader.boolean("metrics_public", False)
    allowed_hosts = _host_names(reader, "allowed_hosts")
    reader.finish()
    # With no pools the embedded Redis becomes the only pool, named default.
    if admin_pool not in (set(pools) or {DEFAULT_POOL}):
        reader.fail("pool", f'no pool named "{admin_pool}" is configured')
    if accounts is None:
        return _AdminSection(admin_pool, {}, metrics_public, allowed_hosts)
    if not isinstance(accounts, dict):
        reader.fail("accounts", f"expected a table of user = password, got {_toml_type(accounts)}")
    read = _read_accounts(_Reader(source, "admin.accounts", accounts))
    return _AdminSection(admin_pool, read, metrics_public, allowed_hosts)


def _host_names(reader: _Reader, key: str) -> tuple[str, ...]:
    """Host names as a browser sends them in `Host` (no port), lower-cased."""
    value = reader.take(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        reader.fail(key, f'expected an array of host names like "queue.example.com", got {_toml_type(value)}')
    for item in value:
        if not HOST_NAME_RE.fullmatch(item):
            reader.fail(key, f'expected a host name or address without port or path, got "{item}"')
    return tuple(item.lower() for item in value)


def _read_accounts(reader: _Reader) -> dict[str, str]:
    accounts: dict[str, str] = {}
    for user in reader.table:
        if ":" in user:
            reader.fail(user, "a basic-auth user name cannot contain ':'")
        accounts[user] = reader.required_string(user, "")
    return accounts
