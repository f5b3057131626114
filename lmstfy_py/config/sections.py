"""Our layout's sections, each checked into its dataclass: a parsed document in, a Config out."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from lmstfy_py.config.model import (
    DEFAULT_POOL,
    FSYNC_POLICIES,
    HOST_NAME_RE,
    HTTP_SERVER_MODULES,
    HTTP_SERVERS,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_CONNECTION_TIMEOUT,
    MAX_CONSUME_TIMEOUT,
    NAME_RE,
    POOL_FORMATS,
    POOL_KINDS,
    UINT16_MAX,
    UINT32_MAX,
    URL_SCHEMES,
    Config,
    ConfigError,
    Defaults,
    FsyncPolicy,
    HttpServer,
    IpNetwork,
    LogConfig,
    LogFormat,
    PoolConfig,
    PoolFormat,
    PoolKind,
    PushConfig,
    ServerConfig,
    TracingConfig,
    installed,
)
from lmstfy_py.config.reader import Reader, toml_type

_SECTIONS = ("server", "defaults", "pools", "admin", "log", "push", "tracing")


def parse_document(source: str, document: Mapping[str, Any]) -> Config:
    """A document in our layout (a parsed TOML file) as a Config; ConfigError names what is wrong."""
    for name, value in document.items():
        if name not in _SECTIONS:
            raise ConfigError(source, f"unknown section [{name}] (known: {', '.join(_SECTIONS)})")
        if not isinstance(value, dict):
            raise ConfigError(source, f"[{name}] must be a table, got {toml_type(value)}")
    server = read_server(Reader(source, "server", document.get("server", {})), ServerConfig())
    defaults = _read_defaults(Reader(source, "defaults", document.get("defaults", {})))
    pools = _read_pools(source, document.get("pools", {}))
    admin = _read_admin(source, document.get("admin", {}), pools)
    log = _read_log(Reader(source, "log", document.get("log", {})))
    push = _read_push(Reader(source, "push", document.get("push", {})))
    tracing = read_tracing(Reader(source, "tracing", document.get("tracing", {})), TracingConfig())
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
        readonly_accounts=admin.readonly_accounts,
        tracing=tracing,
    )


def _read_push(reader: Reader) -> PushConfig:
    value = reader.take("allowed_networks")
    reader.finish()
    if value is None:
        return PushConfig()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        reader.fail("allowed_networks", f'expected an array of CIDR strings like "10.0.0.0/8", got {toml_type(value)}')
    networks: list[IpNetwork] = []
    for item in value:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            reader.fail("allowed_networks", f'expected a network like "10.0.0.0/8" or "::1/128", got "{item}"')
    return PushConfig(allowed_networks=tuple(networks))


def _read_log(reader: Reader) -> LogConfig:
    level = reader.choice("level", LogConfig.level, LOG_LEVELS)
    log_dir = reader.string("dir")
    log_format = cast(LogFormat, reader.choice("format", LogConfig.format, LOG_FORMATS))
    reader.finish()
    return LogConfig(level=level, dir=log_dir, format=log_format)


def read_server(reader: Reader, base: ServerConfig) -> ServerConfig:
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
        events_heartbeat=reader.integer("events_heartbeat", base.events_heartbeat, 1, MAX_CONNECTION_TIMEOUT),
    )
    reader.finish()
    if server.port == server.admin_port:
        reader.fail("admin_port", f"must differ from port ({server.port})")
    missing = [name for name in HTTP_SERVER_MODULES[server.http_server] if not installed(name)]
    if missing:
        needs = ", ".join(missing)
        reader.fail(
            "http_server", f"{server.http_server} needs {needs}: the [fast] extra (pip install '.[fast]' in a checkout)"
        )
    return server


def _read_defaults(reader: Reader) -> Defaults:
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
            raise ConfigError(source, f"expected a table, got {toml_type(value)}", section)
        pools[name] = read_pool(name, Reader(source, section, value))
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


def read_pool(name: str, reader: Reader) -> PoolConfig:
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


def _check_pool_kind(pool: PoolConfig, reader: Reader) -> None:
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


def _check_url(url: str, reader: Reader) -> None:
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
    readonly_accounts: dict[str, str]
    metrics_public: bool
    allowed_hosts: tuple[str, ...]


def _read_admin(source: str, table: dict[str, Any], pools: dict[str, PoolConfig]) -> _AdminSection:
    reader = Reader(source, "admin", table)
    admin_pool = reader.required_string("pool", DEFAULT_POOL)
    accounts, readonly = reader.take("accounts"), reader.take("readonly_accounts")
    metrics_public = reader.boolean("metrics_public", False)
    allowed_hosts = _host_names(reader, "allowed_hosts")
    reader.finish()
    # With no pools the embedded Redis becomes the only pool, named default.
    if admin_pool not in (set(pools) or {DEFAULT_POOL}):
        reader.fail("pool", f'no pool named "{admin_pool}" is configured')
    full = _account_table(reader, "accounts", accounts)
    read_only = _account_table(reader, "readonly_accounts", readonly)
    both = sorted(set(full) & set(read_only))
    if both:
        # Which of the two would a login with that name be? Neither guess is safe: refuse to start.
        problem = "also in [admin.accounts]: an account is either full or read-only, not both"
        raise ConfigError(source, problem, "admin.readonly_accounts", both[0])
    return _AdminSection(admin_pool, full, read_only, metrics_public, allowed_hosts)


def _account_table(reader: Reader, key: str, value: Any) -> dict[str, str]:
    """[admin.accounts] or [admin.readonly_accounts]: user = "password"."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        reader.fail(key, f"expected a table of user = password, got {toml_type(value)}")
    return _read_accounts(Reader(reader.source, f"admin.{key}", value))


def _host_names(reader: Reader, key: str) -> tuple[str, ...]:
    """Host names as a browser sends them in `Host` (no port), lower-cased."""
    value = reader.take(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        reader.fail(key, f'expected an array of host names like "queue.example.com", got {toml_type(value)}')
    for item in value:
        if not HOST_NAME_RE.fullmatch(item):
            reader.fail(key, f'expected a host name or address without port or path, got "{item}"')
    return tuple(item.lower() for item in value)


def _read_accounts(reader: Reader) -> dict[str, str]:
    accounts: dict[str, str] = {}
    for user in reader.table:
        if ":" in user:
            reader.fail(user, "a basic-auth user name cannot contain ':'")
        accounts[user] = reader.required_string(user, "")
    return accounts


# What the export imports (the [otel] extra): checked when an endpoint is set, so the start stops naming it.
OTEL_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.proto.collector.trace.v1.trace_service_pb2")


def read_tracing(reader: Reader, base: TracingConfig) -> TracingConfig:
    endpoint = reader.string("otlp_endpoint", base.otlp_endpoint)
    tracing = TracingConfig(endpoint, reader.required_string("service_name", base.service_name))
    reader.finish()
    if endpoint is None:
        return tracing
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        # The value is not repeated: a URL may hold credentials, which no message shows.
        reader.fail("otlp_endpoint", 'expected an http:// or https:// URL like "http://collector:4318"')
    if not all(installed(module) for module in OTEL_MODULES):
        reader.fail("otlp_endpoint", "exporting spans needs the [otel] extra: pip install 'lmstfy-py[otel]'")
    return tracing
