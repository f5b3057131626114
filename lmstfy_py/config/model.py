"""What a configuration is: the dataclasses a `Config` is made of, its limits and names, and ConfigError.

Nothing here reads a file: reader.py takes values out of a table, sections.py checks each section.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = [
    "COMMAND_LINE",
    "DEFAULT_POOL",
    "FSYNC_POLICIES",
    "HOST_NAME_RE",
    "HTTP_SERVERS",
    "HTTP_SERVER_MODULES",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "MAX_CONNECTION_TIMEOUT",
    "MAX_CONSUME_TIMEOUT",
    "NAME_RE",
    "POOL_FORMATS",
    "POOL_KINDS",
    "UINT16_MAX",
    "UINT32_MAX",
    "URL_SCHEMES",
    "Config",
    "ConfigError",
    "Defaults",
    "FsyncPolicy",
    "HttpServer",
    "IpNetwork",
    "LogConfig",
    "LogFormat",
    "PoolConfig",
    "PoolFormat",
    "PoolKind",
    "PushConfig",
    "ServerConfig",
    "TracingConfig",
]

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
# The HTTP server of every worker: uvicorn with httptools (the [fast] extra, which `dev.py serve`
# installs) where it is installed, else hypercorn (a core dependency).
HttpServer = Literal["hypercorn", "uvicorn"]
HTTP_SERVERS = ("hypercorn", "uvicorn")
# What each server needs beyond the core dependencies, and where it comes from.
HTTP_SERVER_MODULES = {"hypercorn": (), "uvicorn": ("uvicorn", "httptools")}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module blocked by a None in sys.modules (how a test hides one)
        return False


def fastest_http_server() -> HttpServer:
    """The default: uvicorn costs about half hypercorn's CPU per request (docs/PERFORMANCE.md)."""
    return "uvicorn" if all(installed(module) for module in HTTP_SERVER_MODULES["uvicorn"]) else "hypercorn"


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
    http_server: HttpServer = field(default_factory=fastest_http_server)
    # Recurring jobs: at most this many schedules in one namespace, none firing more often than
    # every `min_schedule_every` seconds (one tenant's schedules must not take the server's CPU).
    max_schedules_per_namespace: int = 1000
    min_schedule_every: int = 1
    # Seconds an event stream (SPEC 13) may go without an event before it gets a comment line, so that
    # proxies and clients see the connection alive.
    events_heartbeat: int = 15


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
class TracingConfig:
    """OTLP/HTTP export of the jobs' spans (SPEC 15, tracing/): off without an endpoint."""

    otlp_endpoint: str | None = None  # the collector's base URL: spans go to <it>/v1/traces
    service_name: str = "lmstfy-py"  # the spans' resource attribute service.name


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
    # [admin.readonly_accounts]: basic-auth accounts that may read every admin route and change nothing
    # (SPEC 15); with `accounts`, either turns basic auth on.
    readonly_accounts: dict[str, str] = field(default_factory=dict)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    # What the file said that means nothing here (an lmstfy config file's keys): told once at start.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def embedded(self) -> bool:
        """True when no pool is configured and the embedded Redis must be started."""
        return not self.pools

    def with_embedded(self, url: str) -> Config:
        """This config with the embedded Redis at `url` as its only pool, `default`."""
        return replace(self, pools={DEFAULT_POOL: PoolConfig(DEFAULT_POOL, url=url)}, admin_pool=DEFAULT_POOL)
