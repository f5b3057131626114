"""token-cli run as lmstfy's (`token-cli HOST:PORT -c -n NS -D DESC [-p POOL]`, `-l`, `-d -t`,
`--pools`): lmstfy's output, from a subprocess against a live `lmstfy-py serve`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server
from benchmarks.harness.redis_servers import RedisProcess
from tests.token_cli.test_token_cli import run


@pytest.fixture(scope="module")
def server(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    redis_server.start()
    redis_server.flushall()
    tmp = tmp_path_factory.mktemp("token-cli-lmstfy")
    config = tmp / "lmstfy.toml"
    # Two pools on two dbs of the test Redis.
    config.write_text(
        f'[pools.default]\nurl = "{redis_server.url}/0"\n[pools.other]\nurl = "{redis_server.url}/1"\n'
        "[server]\nworkers = 1\n"
    )
    with Server(tmp, config=config) as running:
        yield running.start()


def address(server: Server) -> str:
    return urlsplit(server.admin_url).netloc  # HOST:PORT, as lmstfy's token-cli takes it


def lmstfy(server: Server, *args: str, script: bool = False) -> tuple[int, str]:
    result = run("", address(server), *args, script=script)
    assert result.stderr == ""
    return result.returncode, result.stdout


def tokens(server: Server, ns: str, pool: str = "default") -> dict[str, str]:
    listed: dict[str, str] = httpx.get(f"{server.admin_url}/token/{ns}", params={"pool": pool}).json()["tokens"]
    return listed


def test_pools(server: Server) -> None:
    assert lmstfy(server, "--pools") == (0, '[\n    "default",\n    "other"\n]\n')
    assert lmstfy(server, "-P") == lmstfy(server, "--pools")


@pytest.mark.parametrize("script", [False, True])
def test_create_list_delete(server: Server, script: bool) -> None:
    ns = f"lm-{int(script)}"
    code, out = lmstfy(server, "-c", "-n", ns, "-D", "billing <workers>", script=script)
    created = json.loads(out)["token"]
    # Go's indented JSON, as lmstfy's admin API answers and its token-cli prints.
    assert (code, out) == (0, f'{{\n    "token": "{created}"\n}}\n')
    assert tokens(server, ns) == {created: "billing <workers>"}
    code, out = lmstfy(server, "-l", "-n", ns, script=script)
    assert (code, out) == (
        0,
        f'{{\n    "tokens": {{\n        "{created}": "billing \\u003cworkers\\u003e"\n    }}\n}}\n',
    )
    assert lmstfy(server, "-d", "-n", ns, "-t", created, script=script) == (0, "ok\n")
    assert tokens(server, ns) == {}


def test_long_options_abbreviations_and_a_chosen_token(server: Server) -> None:
    chosen = "t" * 24
    code, out = lmstfy(server, "--create", "--namespace=lm-long", "--desc", "x", "--token", chosen)
    assert (code, json.loads(out)) == (0, {"token": chosen})
    assert (
        lmstfy(server, "--list", "-n", "lm-long")[1] == f'{{\n    "tokens": {{\n        "{chosen}": "x"\n    }}\n}}\n'
    )


def test_another_pool(server: Server) -> None:
    code, out = lmstfy(server, "-c", "-p", "other", "-n", "lm-pool", "-D", "d")
    created = json.loads(out)["token"]
    assert code == 0 and created.startswith("other:")
    bare = created.removeprefix("other:")
    assert tokens(server, "lm-pool", "other") == {bare: "d"} and tokens(server, "lm-pool") == {}
    assert json.loads(lmstfy(server, "-l", "-p", "other", "-n", "lm-pool")[1]) == {"tokens": {bare: "d"}}
    # -p names the pool of the token to delete (lmstfy's script left it to the default pool).
    assert lmstfy(server, "-d", "-p", "other", "-n", "lm-pool", "-t", bare) == (0, "ok\n")
    assert tokens(server, "lm-pool", "other") == {}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-l"], "param 'namespace' is missing, please use -n to assign the namespace\n"),
        (["-c", "-n", "ns"], "param 'description' is missing, please use -D to assign the description\n"),
        (["-d", "-n", "ns"], "param 'token' is missing, please use -t to assign the token\n"),
    ],
)
def test_missing_parameters(server: Server, args: list[str], expected: str) -> None:
    assert lmstfy(server, *args) == (1, expected)


def test_no_action_and_the_server_s_refusal(server: Server) -> None:
    assert lmstfy(server, "-n", "ns") == (0, "aha, I'm do nothing.\n")
    # Printed as the server answered it; exit 0 as lmstfy's script does.
    assert lmstfy(server, "-c", "-n", "ns", "-D", "d", "-t", "short") == (
        0,
        '{"error":"the user token was too short"}\n',
    )
    assert lmstfy(server, "-c", "-p", "nowhere", "-n", "ns", "-D", "d") == (0, '{"error":"pool not found"}\n')


def test_our_commands_are_unchanged(server: Server) -> None:
    result = run(server.admin_url, "create", "ours", "--description", "d")
    assert result.returncode == 0 and result.stdout.strip() in tokens(server, "ours")
    typo = run(server.admin_url, "crate", "ours")
    assert typo.returncode == 2 and "No such command 'crate'" in typo.stderr


def test_an_unreachable_server_is_one_line() -> None:
    result = run("", "127.0.0.1:1", "--pools")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("token-cli: error: cannot reach the admin API at http://127.0.0.1:1")
