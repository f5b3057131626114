"""lmstfy's own config file (lmstfy 1.0.10's keys) read by load_config: what each key becomes,
what is warned about, and the one-line error naming lmstfy's key."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmstfy_py.config import Config, ConfigError, Defaults, LogConfig, PoolConfig, load_config

DEMO = """Host = "0.0.0.0"
Port = 7777
AdminHost = "127.0.0.1" # optional, default to localhost
AdminPort = 7778
#LogDir = "/var/log/lmstfy"
LogLevel = "info"
#LogFormat = "text"
EnableAccessLog = true

# default params
#TTLSecond = 24 * 60 * 60 // 1 day

[Accounts]
test_user = "change.me"

[AdminRedis]
Addr = "localhost:6379"
# Password = foobared

[Pool]
[Pool.default]
Addr = "localhost:6379"
# Password = foobared
# DB = 0
"""


def load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "lmstfy.toml"
    path.write_text(text)
    return load_config(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message
    return message.removeprefix(f"{tmp_path / 'lmstfy.toml'}: ")


def test_the_demo_file(tmp_path: Path) -> None:
    config = load(tmp_path, DEMO)
    assert (config.server.host, config.server.port, config.server.admin_host, config.server.admin_port) == (
        "0.0.0.0",
        7777,
        "127.0.0.1",
        7778,
    )
    assert config.server.access_log
    assert config.pools == {"default": PoolConfig("default", url="redis://localhost:6379/0", format="lmstfy")}
    assert config.admin_pool == "default"
    assert config.accounts == {"test_user": "change.me"}
    assert config.metrics_public  # lmstfy's /metrics asks for no account
    assert config.log == LogConfig(level="info", format="text")  # logrus's text unless LogFormat = "json"
    assert config.defaults == Defaults()
    assert config.warnings == ()


def test_every_key(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """host = "10.0.0.1"
PORT = 8777
AdminPort = 8778
LogLevel = "WARN"
LogDir = "/var/log/lmstfy"
LogFormat = "json"
EnableAccessLog = false
TTLSecond = 600
DelaySecond = 5
TriesNum = 3
TTRSecond = 30
TimeoutSecond = 10

[AdminRedis]
Addr = "10.0.0.9:6379"
Password = "admin pw"

[Pool.default]
Addr = "10.0.0.2:6379"
Password = "p@ss:word"
DB = 2
MigrateTo = "new"

[Pool.new]
Addr = "10.0.0.3:6379"

[Pool.ha]
Addr = "10.0.0.4:26379, 10.0.0.5:26379"
MasterName = "mymaster"
Password = "pw"
DB = 1
""",
    )
    # Keys match case-insensitively, as BurntSushi/toml matches lmstfy's fields.
    assert (config.server.host, config.server.port, config.server.admin_port) == ("10.0.0.1", 8777, 8778)
    assert config.log == LogConfig(level="warn", dir="/var/log/lmstfy", format="json")
    assert config.defaults == Defaults(ttl=600, delay=5, tries=3, ttr=30, timeout=10)
    assert config.pools["default"] == PoolConfig(
        "default", url="redis://:p%40ss%3Aword@10.0.0.2:6379/2", migrate_to="new", format="lmstfy"
    )
    assert config.pools["ha"] == PoolConfig(
        "ha",
        kind="sentinel",
        master_name="mymaster",
        sentinels=("10.0.0.4:26379", "10.0.0.5:26379"),
        password="pw",
        db=1,
        format="lmstfy",
    )
    # An AdminRedis no pool uses becomes a pool of its own, and the warnings say so.
    assert config.admin_pool == "lmstfy-admin"
    admin = PoolConfig("lmstfy-admin", url="redis://:admin%20pw@10.0.0.9:6379/0", format="lmstfy")
    assert config.pools["lmstfy-admin"] == admin
    assert len(config.warnings) == 1 and 'pool "lmstfy-admin"' in config.warnings[0]


def test_admin_redis_on_a_pool_s_redis_is_that_pool(tmp_path: Path) -> None:
    text = '[AdminRedis]\nAddr = "h:2"\n[Pool.default]\nAddr = "h:1"\n[Pool.other]\nAddr = "h:2"\n'
    config = load(tmp_path, text)
    assert config.admin_pool == "other" and set(config.pools) == {"default", "other"}


def test_keys_without_meaning_are_warned_about_not_refused(tmp_path: Path) -> None:
    text = DEMO + 'PoolSize = 20\nEngineVersion = "redis_v2"\n'  # in [Pool.default]
    text = 'SecondaryStorage = "x"\n' + text
    config = load(tmp_path, text)
    source = tmp_path / "lmstfy.toml"
    assert config.warnings == (
        f"{source}: SecondaryStorage: not a key of lmstfy 1.0.10, ignored",
        f"{source}: [Pool.default] PoolSize: no meaning here (lmstfy-py sizes its own connection pools), ignored",
        f"{source}: [Pool.default] EngineVersion: not a key of lmstfy 1.0.10, ignored",
    )


def test_read_only_accounts(tmp_path: Path) -> None:
    """SPEC 15: lmstfy's `ReadOnlyAccounts` table (any case, as lmstfy matches keys) beside `Accounts`."""
    config = load(tmp_path, DEMO.replace("[Accounts]", '[readonlyAccounts]\nviewer = "look"\n\n[Accounts]'))
    assert (config.accounts, config.readonly_accounts) == ({"test_user": "change.me"}, {"viewer": "look"})
    assert config.warnings == ()


def test_our_own_file_is_not_taken_for_lmstfy_s(tmp_path: Path) -> None:
    config = load(tmp_path, '[server]\nport = 8000\n[pools.default]\nurl = "redis://h:1/0"\n')
    # Our own file's pools keep our default ("auto": lmstfy's layout served when found), not lmstfy's file's "lmstfy".
    assert config.pools["default"].format == "auto" and config.log == LogConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Port = "7777"\n[Pool.default]\nAddr = "h:1"\n', "Port: expected an integer, got a string"),
        ('Port = 7777\nAdminPort = 7777\n[Pool.default]\nAddr = "h:1"\n', "AdminPort: must differ from port"),
        ('LogLevel = "loud"\n[Pool.default]\nAddr = "h:1"\n', 'LogLevel: expected "panic" or "fatal"'),
        ('TriesNum = 0\n[Pool.default]\nAddr = "h:1"\n', "TriesNum: must be between 1 and 65535, got 0"),
        ('TimeoutSecond = 601\n[Pool.default]\nAddr = "h:1"\n', "TimeoutSecond: must be between 0 and 600"),
        ('Host = "x"\n', "a [Pool.default] table is required (lmstfy: default redis pool not found)"),
        ("[Pool.default]\nDB = 1\n", "[Pool.default] Addr: required"),
        ('[Pool.default]\nAddr = "localhost"\n', '[Pool.default] Addr: expected "host:port" with a port 1..65535'),
        ('[Pool.default]\nAddr = "a:1,b:2"\n', "[Pool.default] Addr: several addresses are Sentinels"),
        ('[Pool.default]\nAddr = "a:1"\nDB = -1\n', "[Pool.default] DB: must be 0 or more, got -1"),
        ('[Pool.default]\nAddr = "a:1"\nDB = "0"\n', "[Pool.default] DB: expected an integer"),
        ('[Pool.default]\nAddr = "a:1"\nMigrateTo = "gone"\n', "[Pool.default] MigrateTo: must name another"),
        ('[Pool.default]\nAddr = "a:1"\n[Accounts]\nroot = 1\n', "[Accounts] root: expected a string"),
        ('[Pool.default]\nAddr = "a:1"\n[ReadOnlyAccounts]\nv = 1\n', "[ReadOnlyAccounts] v: expected a string"),
        ('ReadOnlyAccounts = "v:pw"\n[Pool.default]\nAddr = "a:1"\n', "ReadOnlyAccounts: expected a table"),
        (
            '[Pool.default]\nAddr = "a:1"\n[Accounts]\nops = "a"\n[ReadOnlyAccounts]\nops = "b"\n',
            "[ReadOnlyAccounts] ops: also in [admin.accounts]: an account is either full or read-only",
        ),
        ('Pool = "a:1"\n', "Pool: expected a table"),
        ('[Pool.default]\nAddr = "a:1"\n[AdminRedis]\nAddr = ""\n', "[AdminRedis] Addr: required"),
    ],
)
def test_errors_name_lmstfy_s_key(tmp_path: Path, text: str, expected: str) -> None:
    assert error_of(tmp_path, text).startswith(expected)
