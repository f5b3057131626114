"""Config files and flags: what parses, and the one-line error each mistake gets."""

from __future__ import annotations

import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmstfy_py.config import Config, ConfigError, Defaults, PoolConfig, ServerConfig, load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "lmstfy.toml"

FULL = """
[server]
host = "127.0.0.2"
port = 8777
admin_host = "127.0.0.3"
admin_port = 8778
workers = 4
data_dir = "/var/lib/lmstfy"
access_log = true
fsync = "always"

[defaults]
ttl = 3600
delay = 5
tries = 3
ttr = 30
timeout = 10

[pools.default]
url = "redis://10.0.0.1:6379/2"
password = "pw"
migrate_to = "new"

[pools.new]
kind = "standalone"
url = "unix:///run/redis.sock"

[pools.sentinel-1]
kind = "sentinel"
master_name = "mymaster"
sentinels = ["10.0.0.1:26379", "[::1]:26380"]
sentinel_password = "spw"
db = 3

[pools.big_cluster]
kind = "cluster"
cluster_nodes = ["10.0.0.5:7000", "10.0.0.6:7000"]

[admin]
pool = "new"

[admin.accounts]
root = "secret"
ops = "other"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lmstfy.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'lmstfy.toml'}: ")
    return message.split(": ", 1)[1]


def test_full_file_parses(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert config.server == ServerConfig(
        "127.0.0.2", 8777, "127.0.0.3", 8778, 4, "/var/lib/lmstfy", True, fsync="always"
    )
    assert config.defaults == Defaults(ttl=3600, delay=5, tries=3, ttr=30, timeout=10)
    assert config.pools == {
        "default": PoolConfig("default", url="redis://10.0.0.1:6379/2", password="pw", migrate_to="new"),
        "new": PoolConfig("new", url="unix:///run/redis.sock"),
        "sentinel-1": PoolConfig(
            "sentinel-1",
            kind="sentinel",
            master_name="mymaster",
            sentinels=("10.0.0.1:26379", "[::1]:26380"),
            sentinel_password="spw",
            db=3,
        ),
        "big_cluster": PoolConfig("big_cluster", kind="cluster", cluster_nodes=("10.0.0.5:7000", "10.0.0.6:7000")),
    }
    assert config.admin_pool == "new"
    assert config.accounts == {"root": "secret", "ops": "other"}
    assert not config.embedded


def test_no_file_and_empty_file_give_defaults(tmp_path: Path) -> None:
    assert load_config(None) == Config()
    assert load_config(write(tmp_path, "")) == Config()
    config = Config()
    assert config.embedded
    assert config.server.port == 7777 and config.server.admin_host == "127.0.0.1"
    assert config.server.fsync == "always"
    assert config.defaults == Defaults(ttl=86400, delay=0, tries=1, ttr=120, timeout=0)


def test_example_file_parses_with_and_without_its_commented_settings(tmp_path: Path) -> None:
    assert load_config(EXAMPLE) == Config()
    # Every commented-out setting must be real too: uncomment them all and parse again.
    uncommented, count = re.subn(r"(?m)^#(?=\[|[a-z_]+ = )", "", EXAMPLE.read_text())
    assert count >= 20
    config = load_config(write(tmp_path, uncommented))
    assert set(config.pools) == {"default", "sentinel-pool", "cluster-pool", "next"}
    assert config.pools["default"].migrate_to == "next"
    assert config.accounts == {"admin": "change-me"}
    assert config.admin_allowed_hosts == ("lmstfy-admin.internal",)
    assert config.push.allowed_networks == (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))
    assert config.tracing.otlp_endpoint == "http://otel-collector:4318"


def test_hardening_keys(tmp_path: Path) -> None:
    config = Config()
    assert config.admin_allowed_hosts == () and config.push.allowed_networks is None
    assert (config.server.max_schedules_per_namespace, config.server.min_schedule_every) == (1000, 1)
    text = (
        "[server]\nmax_schedules_per_namespace = 5\nmin_schedule_every = 60\n"
        '[admin]\nallowed_hosts = ["Queue.Example.com", "[::1]", "10.1.2.3"]\n'
        '[push]\nallowed_networks = ["10.0.0.0/8", "192.168.1.7", "::1/128"]\n'
    )
    config = load_config(write(tmp_path, text))
    assert (config.server.max_schedules_per_namespace, config.server.min_schedule_every) == (5, 60)
    assert Config().server.events_heartbeat == 15  # SPEC 13: a comment every 15 s when idle
    assert load_config(write(tmp_path, "[server]\nevents_heartbeat = 2\n")).server.events_heartbeat == 2
    assert config.admin_allowed_hosts == ("queue.example.com", "[::1]", "10.1.2.3")
    expected = ("10.0.0.0/8", "192.168.1.7/32", "::1/128")
    assert config.push.allowed_networks == tuple(ipaddress.ip_network(net) for net in expected)
    assert load_config(write(tmp_path, "[push]\nallowed_networks = []\n")).push.allowed_networks == ()


def test_http_server(tmp_path: Path) -> None:
    # The test set-up installs the [fast] extra, as README's `dev.py serve` does: a newcomer gets uvicorn.
    assert ServerConfig().http_server == "uvicorn"
    assert load_config(write(tmp_path, "")).server.http_server == "uvicorn"
    assert load_config(write(tmp_path, '[server]\nhttp_server = "hypercorn"\n')).server.http_server == "hypercorn"


@pytest.mark.parametrize("hidden", ["uvicorn", "httptools"])
def test_http_server_is_hypercorn_without_the_fast_extra(tmp_path: Path, hidden: str) -> None:
    """A plain `pip install lmstfy-py` (no [fast]) serves on hypercorn, and asking for uvicorn says what it needs."""
    asks_uvicorn = write(tmp_path, '[server]\nhttp_server = "uvicorn"\n')
    script = f"""
import sys
sys.modules[{hidden!r}] = None  # what an interpreter without the module sees: it cannot be imported
from lmstfy_py.config import ConfigError, ServerConfig, load_config
print(ServerConfig().http_server)
try:
    load_config({str(asks_uvicorn)!r})
except ConfigError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    default, refusal = done.stdout.splitlines()
    assert default == "hypercorn"
    assert f"uvicorn needs {hidden}: the [fast] extra" in refusal


def test_connection_timeouts(tmp_path: Path) -> None:
    assert (ServerConfig().body_timeout, ServerConfig().keep_alive_timeout) == (30, 5)
    server = load_config(write(tmp_path, "[server]\nbody_timeout = 2\nkeep_alive_timeout = 75\n")).server
    assert (server.body_timeout, server.keep_alive_timeout) == (2, 75)
    assert ServerConfig().redis_hang_timeout == 30
    assert load_config(write(tmp_path, "[server]\nredis_hang_timeout = 5\n")).server.redis_hang_timeout == 5


def test_with_embedded_makes_the_default_pool() -> None:
    config = Config().with_embedded("unix:///tmp/x/redis.sock")
    assert config.pools == {"default": PoolConfig("default", url="unix:///tmp/x/redis.sock")}
    assert config.admin_pool == "default"
    assert not config.embedded


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[server]\nport = 7777\nport = 1\nhost = 'x'\n", "invalid TOML at line 3, column 9: Cannot overwrite a value"),
        ("[server\n", "invalid TOML at line 1, column 8: Expected ']' at the end of a table declaration"),
        ("[serverr]\n", "unknown section [serverr] (known: server, defaults, pools, admin, log, push, tracing)"),
        ("[server]\nmin_schedule_every = 0\n", "[server] min_schedule_every: must be between 1 and 4294967295, got 0"),
        ("[server]\nevents_heartbeat = 0\n", "[server] events_heartbeat: must be between 1 and 3600, got 0"),
        (
            '[admin]\nallowed_hosts = "x"\n',
            '[admin] allowed_hosts: expected an array of host names like "queue.example.com"',
        ),
        ('[admin]\nallowed_hosts = ["x:80"]\n', "[admin] allowed_hosts: expected a host name or address without port"),
        (
            '[push]\nallowed_networks = ["10.0.0.0/33"]\n',
            '[push] allowed_networks: expected a network like "10.0.0.0/8"',
        ),
        ("[push]\nallowed_networks = [1]\n", "[push] allowed_networks: expected an array of CIDR strings"),
        ("[push]\nallowed = 1\n", "[push] allowed: unknown key"),
        ("server = 1\n", "[server] must be a table, got an integer"),
        ("[server]\nprot = 1\n", "[server] prot: unknown key"),
        ('[server]\nport = "7777"\n', "[server] port: expected an integer, got a string"),
        ("[server]\nport = 7777.0\n", "[server] port: expected an integer, got a float"),
        ("[server]\nport = 70000\n", "[server] port: must be between 1 and 65535, got 70000"),
        ("[server]\nworkers = true\n", "[server] workers: expected an integer, got a boolean"),
        (
            '[server]\nhttp_server = "granian"\n',
            '[server] http_server: expected "hypercorn" or "uvicorn", got "granian"',
        ),
        ("[server]\naccess_log = 1\n", "[server] access_log: expected true or false, got an integer"),
        ('[server]\nfsync = "no"\n', '[server] fsync: expected "everysec" or "always", got "no"'),
        ("[server]\nfsync = true\n", "[server] fsync: expected a string, got a boolean"),
        ('[server]\nhost = ""\n', "[server] host: must not be empty"),
        ("[server]\nadmin_port = 7777\n", "[server] admin_port: must differ from port (7777)"),
        ("[server]\nbody_timeout = 0\n", "[server] body_timeout: must be between 1 and 3600, got 0"),
        ("[server]\nbody_timeout = 2.5\n", "[server] body_timeout: expected an integer, got a float"),
        ("[server]\nkeep_alive_timeout = 3601\n", "[server] keep_alive_timeout: must be between 1 and 3600, got 3601"),
        ("[server]\nredis_hang_timeout = 0\n", "[server] redis_hang_timeout: must be between 1 and 3600, got 0"),
        ("[defaults]\ntries = 0\n", "[defaults] tries: must be between 1 and 65535, got 0"),
        ("[defaults]\nttr = 0\n", "[defaults] ttr: must be between 1 and 4294967295, got 0"),
        ("[defaults]\nttl = 4294967296\n", "[defaults] ttl: must be between 0 and 4294967295, got 4294967296"),
        ("[defaults]\ntimeout = 601\n", "[defaults] timeout: must be between 0 and 600, got 601"),
        ("[defaults]\nttl = 10\ndelay = 20\n", "[defaults] delay: must not exceed ttl (10) unless ttl is 0"),
        ("[pools.default]\nurl = 6379\n", "[pools.default] url: expected a string, got an integer"),
        ("[pools.default]\nkind = 'standalone'\n", "[pools.default] url: required for a standalone pool"),
        ("[pools.default]\nurl = 'http://x'\n", "[pools.default] url: expected a redis://, rediss:// or unix:// URL"),
        ("[pools.default]\nurl = 'unix://'\n", "[pools.default] url: a unix:// URL needs a socket path"),
        ("[pools.default]\nkind = 'mongo'\n", "[pools.default] kind: expected one of standalone, sentinel, cluster"),
        ("[pools.default]\nurl = 'redis://x'\nbogus = 1\n", "[pools.default] bogus: unknown key"),
        ("[pools.default]\nkind = 'sentinel'\nsentinels = ['a:1']\n", "[pools.default] master_name: required"),
        (
            "[pools.default]\nkind = 'sentinel'\nmaster_name = 'm'\nsentinels = ['a']\n",
            '[pools.default] sentinels: expected "host:port" with a port 1..65535, got "a"',
        ),
        (
            "[pools.default]\nkind = 'sentinel'\nmaster_name = 'm'\nsentinels = 'a:1'\n",
            '[pools.default] sentinels: expected an array of "host:port" strings, got a string',
        ),
        ("[pools.default]\nkind = 'cluster'\n", "[pools.default] cluster_nodes: required for a cluster pool"),
        (
            "[pools.default]\nkind = 'cluster'\ncluster_nodes = ['a:1']\nurl = 'redis://x'\n",
            "[pools.default] url: only used by a standalone pool, this one is cluster",
        ),
        (
            "[pools.default]\nkind = 'cluster'\ncluster_nodes = ['a:1']\ndb = 1\n",
            "[pools.default] db: a Redis Cluster has only db 0",
        ),
        (
            "[pools.default]\nurl = 'redis://x'\nformat = 'go'\n",
            '[pools.default] format: expected "auto" or "lmstfy-py" or "lmstfy"',
        ),
        (
            "[pools.default]\nkind = 'cluster'\ncluster_nodes = ['a:1']\nformat = 'lmstfy'\n",
            "[pools.default] format: lmstfy never ran on a Redis Cluster",
        ),
        ("[pools.other]\nurl = 'redis://x'\n", "a [pools.default] table is required when any pool is configured"),
        ("[pools.'bad:name']\nurl = 'redis://x'\n", "[pools.bad:name]: pool names may use only letters"),
        ("[pools]\ndefault = 'redis://x'\n", "[pools.default]: expected a table, got a string"),
        ("[pools.default]\nurl = 'redis://x'\nmigrate_to = 'nowhere'\n", "[pools.default] migrate_to: must name"),
        ("[pools.default]\nurl = 'redis://x'\nmigrate_to = 'default'\n", "[pools.default] migrate_to: must name"),
        ("[admin]\npool = 'other'\n", '[admin] pool: no pool named "other" is configured'),
        ("[admin]\nusers = 1\n", "[admin] users: unknown key"),
        ("[admin]\naccounts = 'root:pw'\n", "[admin] accounts: expected a table of user = password, got a string"),
        ("[admin.accounts]\nroot = 1\n", "[admin.accounts] root: expected a string, got an integer"),
        ("[admin.accounts]\nroot = ''\n", "[admin.accounts] root: must not be empty"),
        ("[admin.accounts]\n'a:b' = 'pw'\n", "[admin.accounts] a:b: a basic-auth user name cannot contain ':'"),
        ("[admin]\nreadonly_accounts = 1\n", "[admin] readonly_accounts: expected a table of user = password"),
        ("[admin.readonly_accounts]\nops = ''\n", "[admin.readonly_accounts] ops: must not be empty"),
        (
            "[admin.accounts]\nops = 'a'\n[admin.readonly_accounts]\nops = 'b'\n",
            "[admin.readonly_accounts] ops: also in [admin.accounts]: an account is either full or read-only, not both",
        ),
    ],
)
def test_bad_file_gives_one_line_naming_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    assert error_of(tmp_path, text).startswith(expected)


def test_readonly_accounts_beside_the_full_ones(tmp_path: Path) -> None:
    """SPEC 15: [admin.readonly_accounts] alone turns basic auth on; with [admin.accounts] both are kept."""
    assert Config().readonly_accounts == {}
    alone = load_config(write(tmp_path, '[admin.readonly_accounts]\nviewer = "look"\n'))
    assert (alone.accounts, alone.readonly_accounts) == ({}, {"viewer": "look"})
    both = load_config(write(tmp_path, '[admin.accounts]\nroot = "pw"\n[admin.readonly_accounts]\nviewer = "look"\n'))
    assert (both.accounts, both.readonly_accounts) == ({"root": "pw"}, {"viewer": "look"})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^.*nope\.toml: cannot read: No such file or directory$"):
        load_config(tmp_path / "nope.toml")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read: Is a directory"):
        load_config(tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "lmstfy.toml"
    path.write_bytes(b"[server]\nhost = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(path)


def test_command_line_flags_win_over_the_file(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, FULL),
        host="::",
        port=9000,
        admin_host="0.0.0.0",
        admin_port=9001,
        data_dir=tmp_path / "data",
        workers=2,
        fsync="everysec",
        http_server="uvicorn",
    )
    assert config.server == ServerConfig(
        "::", 9000, "0.0.0.0", 9001, 2, str(tmp_path / "data"), True, fsync="everysec", http_server="uvicorn"
    )
    assert set(config.pools) == {"default", "new", "sentinel-1", "big_cluster"}


def test_flags_left_at_none_change_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    assert load_config(path, host=None, port=None, redis_url=None) == load_config(path)


def test_redis_url_flag_replaces_every_pool(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL), redis_url="redis://127.0.0.1:6390/1")
    assert config.pools == {"default": PoolConfig("default", url="redis://127.0.0.1:6390/1")}
    assert config.admin_pool == "default"
    assert load_config(None, redis_url="unix:///run/r.sock").pools["default"].url == "unix:///run/r.sock"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"port": 0}, "command line: --port: must be between 1 and 65535, got 0"),
        ({"admin_port": 7777}, "command line: --admin-port: must differ from port (7777)"),
        ({"workers": 0}, "command line: --workers: must be between 1 and 256, got 0"),
        ({"data_dir": ""}, "command line: --data-dir: must not be empty"),
        ({"fsync": "ALWAYS"}, 'command line: --fsync: expected "everysec" or "always", got "ALWAYS"'),
        ({"http_server": "Uvicorn"}, 'command line: --http-server: expected "hypercorn" or "uvicorn", got "Uvicorn"'),
        ({"redis_url": "localhost:6379"}, "command line: --redis-url: expected a redis://, rediss:// or unix://"),
    ],
)
def test_bad_flags_are_named_as_flags(flags: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, **flags)  # type: ignore[arg-type]
    assert str(caught.value).startswith(expected)
