"""lmstfy's own config file, read as is (SPEC section 12): `lmstfy-py serve -c lmstfy.toml`.

lmstfy 1.0.10 (its config/ package) decodes the file into PascalCase fields, matching each key
to a field case-insensitively and ignoring keys it does not know:

    Host, Port, AdminHost, AdminPort             -> [server] host, port, admin_host, admin_port
    EnableAccessLog                              -> [server] access_log
    LogLevel, LogDir, LogFormat                  -> [log] level, dir, format ("json", else logrus's text)
    TTLSecond, DelaySecond, TriesNum,
    TTRSecond, TimeoutSecond                     -> [defaults] ttl, delay, tries, ttr, timeout
    [Accounts] user = "password"                 -> [admin.accounts]
    [ReadOnlyAccounts] user = "password"         -> [admin.readonly_accounts] (SPEC 15)
    [Pool.<name>] Addr, Password, DB,
                  MasterName, MigrateTo          -> [pools.<name>], format = "lmstfy"
    [AdminRedis] Addr, Password, DB, MasterName  -> [admin] pool: the pool on the same Redis
                                                    ([admin] metrics_public = true: lmstfy's /metrics is open)

Each key is translated into our own layout, which sections.py then checks like our own file; an
error names lmstfy's key (`lmstfy.toml: [Pool.default] Addr: ...`). A pool here is lmstfy-format:
its Redis may hold what lmstfy left there. `Addr` with `MasterName` lists Sentinels, comma-separated
(lmstfy asks the first one whether it is a Sentinel; the master name decides here). A key that
means nothing to lmstfy-py (PoolSize) or that lmstfy 1.0.10 does not have (later versions' keys)
is not an error: it becomes one warning, told once at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from lmstfy_py.config.model import DEFAULT_POOL, Config, ConfigError
from lmstfy_py.config.sections import parse_document

# The pool the AdminRedis becomes when no [Pool.*] uses the same Redis.
ADMIN_POOL = "lmstfy-admin"

# lmstfy's top-level keys by our section: our key -> lmstfy's name (BurntSushi/toml matches it lower-cased).
_TOP_NAMES = {
    "server": dict(
        host="Host", port="Port", admin_host="AdminHost", admin_port="AdminPort", access_log="EnableAccessLog"
    ),
    "log": dict(level="LogLevel", dir="LogDir", format="LogFormat"),
    "defaults": dict(ttl="TTLSecond", delay="DelaySecond", tries="TriesNum", ttr="TTRSecond", timeout="TimeoutSecond"),
}
# lower-cased lmstfy name -> (our section, our key, lmstfy's name)
_TOP = {name.lower(): (section, ours, name) for section, names in _TOP_NAMES.items() for ours, name in names.items()}
_TABLES = {"accounts": "Accounts", "readonlyaccounts": "ReadOnlyAccounts", "adminredis": "AdminRedis", "pool": "Pool"}
# lmstfy's tables of basic-auth accounts -> our key of [admin].
_ACCOUNTS = {"accounts": "accounts", "readonlyaccounts": "readonly_accounts"}
# Keys lmstfy 1.0.10 reads that lmstfy-py has no use for, and why.
_NO_MEANING = {"poolsize": "lmstfy-py sizes its own connection pools"}
_REDIS_KEYS = {"addr": "Addr", "password": "Password", "db": "DB", "mastername": "MasterName", "migrateto": "MigrateTo"}


def is_lmstfy_document(document: Mapping[str, Any]) -> bool:
    """True for lmstfy's layout: none of our section names, some key of lmstfy's (or PascalCase)."""
    return any(key[:1].isupper() or key.lower() in _TOP or key.lower() in _TABLES for key in document)


@dataclass
class _Translation:
    """Our layout's document, built key by key, with what to call each key in an error."""

    source: str
    document: dict[str, dict[str, Any]] = field(default_factory=dict)
    names: dict[tuple[str | None, str | None], tuple[str | None, str | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def put(self, section: str, key: str, value: Any, lmstfy: tuple[str | None, str]) -> None:
        self.document.setdefault(section, {})[key] = value
        self.names[(section, key)] = lmstfy

    def warn(self, section: str | None, key: str, why: str) -> None:
        where = f"[{section}] {key}" if section else key
        self.warnings.append(f"{self.source}: {where}: {why}, ignored")

    def fail(self, section: str | None, key: str | None, problem: str) -> ConfigError:
        return ConfigError(self.source, problem, section, key)


def parse(source: str, document: Mapping[str, Any]) -> Config:
    """lmstfy's config file (parsed TOML) as a Config, its warnings in `Config.warnings`."""
    found = _Translation(source)
    # The AdminRedis last: it is matched against the pools.
    for key, value in sorted(document.items(), key=lambda item: item[0].lower() == "adminredis"):
        _translate_top(found, key, value)
    # As lmstfy: logrus's text lines unless LogFormat = "json"; /metrics needs no admin account.
    found.document.setdefault("log", {}).setdefault("format", "text")
    found.document.setdefault("admin", {})["metrics_public"] = True
    if DEFAULT_POOL not in found.document.get("pools", {}):
        raise found.fail(
            None, None, f"a [Pool.{DEFAULT_POOL}] table is required (lmstfy: default redis pool not found)"
        )
    try:
        config = parse_document(source, found.document)
    except ConfigError as exc:
        section, name = found.names.get((exc.section, exc.key), (exc.section, exc.key))
        raise ConfigError(source, exc.problem, section, name) from None
    return replace(config, warnings=tuple(found.warnings))


def _translate_top(found: _Translation, key: str, value: Any) -> None:
    lower = key.lower()
    if lower in _TOP:
        section, ours, name = _TOP[lower]
        _put_value(found, section, ours, value, name)
    elif lower in _TABLES:
        if not isinstance(value, dict):
            raise found.fail(None, _TABLES[lower], "expected a table")
        if lower in _ACCOUNTS:
            _translate_accounts(found, _ACCOUNTS[lower], _TABLES[lower], value)
        else:
            {"adminredis": _translate_admin, "pool": _translate_pools}[lower](found, value)
    else:
        found.warn(None, key, "not a key of lmstfy 1.0.10")


def _put_value(found: _Translation, section: str, ours: str, value: Any, name: str) -> None:
    if ours == "dir" and value == "":
        return  # lmstfy's default: stdout and stderr
    if ours == "format" and isinstance(value, str):
        value = "json" if value == "json" else "text"  # lmstfy: "json", or logrus's text formatter
    if ours == "level" and isinstance(value, str):
        value = value.lower()  # logrus.ParseLevel ignores case
    found.put(section, ours, value, (None, name))


def _translate_accounts(found: _Translation, ours: str, theirs: str, table: dict[str, Any]) -> None:
    found.document.setdefault("admin", {})[ours] = dict(table)
    found.names[("admin", ours)] = (None, theirs)
    for user in table:
        found.names[(f"admin.{ours}", user)] = (theirs, user)


def _translate_pools(found: _Translation, table: dict[str, Any]) -> None:
    pools = found.document.setdefault("pools", {})
    for name, conf in table.items():
        section = f"Pool.{name}"
        if not isinstance(conf, dict):
            raise found.fail(section, None, "expected a table")
        pools[name] = {**_redis_pool(found, section, conf, pool=True), "format": "lmstfy"}
        for ours, theirs in (("url", "Addr"), ("sentinels", "Addr"), ("master_name", "MasterName")):
            found.names[(f"pools.{name}", ours)] = (section, theirs)
        for ours, theirs in (("password", "Password"), ("db", "DB"), ("migrate_to", "MigrateTo")):
            found.names[(f"pools.{name}", ours)] = (section, theirs)
        found.names[(f"pools.{name}", None)] = (section, None)


def _translate_admin(found: _Translation, table: dict[str, Any]) -> None:
    admin = _redis_pool(found, "AdminRedis", table, pool=False)
    pools = found.document.setdefault("pools", {})
    same = [name for name, pool in pools.items() if _same_redis(pool, admin)]
    if same:
        name = DEFAULT_POOL if DEFAULT_POOL in same else sorted(same)[0]
    else:
        name = _free_name(pools)
        pools[name] = {**admin, "format": "lmstfy"}
        found.names[(f"pools.{name}", "url")] = ("AdminRedis", "Addr")
        found.warnings.append(
            f"{found.source}: [AdminRedis] is a Redis no [Pool.*] uses: lmstfy-py serves it as pool "
            f'"{name}" too (listed by /pools), and keeps the tokens, limits and pushers of every pool there'
        )
    found.document.setdefault("admin", {})["pool"] = name


def _same_redis(pool: Mapping[str, Any], admin: Mapping[str, Any]) -> bool:
    connection = ("kind", "url", "sentinels", "master_name", "password", "db")
    return all(pool.get(key) == admin.get(key) for key in connection)


def _free_name(pools: Mapping[str, Any]) -> str:
    name, n = ADMIN_POOL, 1
    while name in pools:
        n += 1
        name = f"{ADMIN_POOL}-{n}"
    return name


def _redis_pool(found: _Translation, section: str, conf: Mapping[str, Any], *, pool: bool) -> dict[str, Any]:
    """One RedisConf (a [Pool.x] table or AdminRedis) as our pool table (without format)."""
    values: dict[str, Any] = {}
    for key, value in conf.items():
        lower = key.lower()
        if lower in _REDIS_KEYS and (pool or lower != "migrateto"):
            values[lower] = value
        elif lower in _NO_MEANING:
            found.warn(section, key, f"no meaning here ({_NO_MEANING[lower]})")
        else:
            found.warn(section, key, "not a key of lmstfy 1.0.10")
    addresses = _addresses(found, section, values.get("addr"))
    password, db = values.get("password"), values.get("db", 0)
    _check_type(found, section, "Password", password, str)
    _check_type(found, section, "DB", db, int)
    table: dict[str, Any]
    if values.get("mastername"):
        table = {"kind": "sentinel", "master_name": values["mastername"], "sentinels": addresses, "db": db}
        if password:
            table["password"] = password
    else:
        if len(addresses) > 1:
            raise found.fail(section, "Addr", "several addresses are Sentinels: MasterName is required")
        if not isinstance(db, int) or isinstance(db, bool) or db < 0:
            raise found.fail(section, "DB", f"must be 0 or more, got {db}")
        auth = f":{quote(password, safe='')}@" if password else ""
        table = {"kind": "standalone", "url": f"redis://{auth}{addresses[0]}/{db}"}
    if values.get("migrateto"):
        table["migrate_to"] = values["migrateto"]
    return table


def _check_type(found: _Translation, section: str, key: str, value: Any, kind: type) -> None:
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise found.fail(section, key, f"expected {'a string' if kind is str else 'an integer'}")


def _addresses(found: _Translation, section: str, addr: Any) -> list[str]:
    if not isinstance(addr, str) or not addr.strip():
        raise found.fail(section, "Addr", 'required: "host:port" (Sentinels: several, comma-separated)')
    addresses = [part.strip() for part in addr.split(",")]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise found.fail(section, "Addr", f'expected "host:port" with a port 1..65535, got "{address}"')
    return addresses
