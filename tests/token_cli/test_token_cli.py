"""token-cli (`lmstfy-py token ...` and `scripts/token-cli`) as a user runs it: a subprocess
talking to a live `lmstfy-py serve` on the session's test Redis.

One server serves the whole module (each test uses its own namespaces); a second one, with
admin accounts configured, serves the basic-auth tests.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, free_port, wait_until
from benchmarks.harness.redis_servers import RedisProcess
from lmstfy_py import __version__

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "token-cli"
DEAD_TIMEOUT = 10.0
RUN_TIMEOUT = 30.0
USER, PASSWORD = "ops", "s3cret-pass"
ERROR_LINE = re.compile(r"token-cli: error: [^\n]+\n")


@pytest.fixture(scope="module")
def server(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    redis_server.start()
    redis_server.flushall()
    # One worker is enough here (the access-log switch reaches every worker anyway).
    tmp = tmp_path_factory.mktemp("token-cli")
    with Server(tmp, redis_url=redis_server.url, args=["--workers", "1"]) as running:
        yield running.start()


@pytest.fixture(scope="module")
def auth_server(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    redis_server.start()
    tmp = tmp_path_factory.mktemp("token-cli-auth")
    config = tmp / "lmstfy.toml"
    config.write_text(f'[pools.default]\nurl = "{redis_server.url}"\n\n[admin.accounts]\n{USER} = "{PASSWORD}"\n')
    with Server(tmp, config=config) as running:
        yield running.start()


def run(
    admin_url: str, *args: str, env: dict[str, str] | None = None, stdin: str = "", script: bool = False
) -> subprocess.CompletedProcess[str]:
    """token-cli with `args`, in an environment free of the caller's LMSTFY_ADMIN* settings."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("LMSTFY_ADMIN")}
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "lmstfy_py.cli", "token"]
    admin = ["--admin", admin_url] if admin_url else []
    return subprocess.run(
        [*command, *admin, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**clean, **(env or {})},
        cwd=ROOT,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def failed(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The one-line error of a failed run."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert ERROR_LINE.fullmatch(result.stderr), result.stderr
    return result.stderr


def lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def row_of(table: str, first_cell: str) -> list[str]:
    """The cells of the table row whose first cell is `first_cell`."""
    (row,) = [line.split() for line in lines(table) if line.split()[:1] == [first_cell]]
    return row


def create_token(server: Server, ns: str, *extra: str) -> str:
    return ok(run(server.admin_url, "create", ns, "--description", "made by a test", *extra)).strip()


def publish(server: Server, token: str, ns: str, queue: str, body: bytes, **headers: str) -> str:
    url = f"{server.data_url}/api/{ns}/{queue}"
    response = httpx.put(url, params={"token": token}, content=body, headers=headers, timeout=5)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def deadletter_size(server: Server, ns: str, queue: str) -> int:
    response = httpx.get(f"{server.data_url}/api/{ns}/{queue}/deadletter/size", timeout=5)
    assert response.status_code == 200, response.text
    size: int = response.json()["size"]
    return size


def ready_size(server: Server, ns: str, queue: str) -> int:
    size: int = httpx.get(f"{server.data_url}/api/{ns}/{queue}/size", timeout=5).json()["size"]
    return size


def kill_jobs(server: Server, token: str, ns: str, queue: str, count: int) -> None:
    """Consumes `count` jobs of one try with ttr=1, one by one, and waits until they are dead."""
    url = f"{server.data_url}/api/{ns}/{queue}"
    for _ in range(count):
        response = httpx.get(url, params={"token": token, "ttr": 1}, timeout=5)
        assert response.status_code == 200, response.text
        time.sleep(0.002)  # distinct expiry milliseconds: the jobs die in the order they were consumed
    assert wait_until(lambda: deadletter_size(server, ns, queue) == count, DEAD_TIMEOUT)


@dataclass(frozen=True)
class DeadJobs:
    ns: str
    token: str
    text_id: str
    binary_id: str
    attr_id: str


@pytest.fixture(scope="module")
def dead(server: Server) -> DeadJobs:
    """Dead letters of cli-dead/peek (a text, a binary and an attributed job) and cli-dead/rescue (3 jobs)."""
    ns = "cli-dead"
    token = create_token(server, ns)
    text_id = publish(server, token, ns, "peek", "héllo\nworld".encode())
    binary_id = publish(server, token, ns, "peek", b"\xff\xfe\x00\x01")
    attr_id = publish(server, token, ns, "peek", b"x" * 200, **{"Enable-Job-Version": "YES", "Job-Attr-Trace": "abc"})
    for i in range(3):
        publish(server, token, ns, "rescue", f"job-{i}".encode())
    kill_jobs(server, token, ns, "peek", 3)
    kill_jobs(server, token, ns, "rescue", 3)
    return DeadJobs(ns, token, text_id, binary_id, attr_id)


# -- read-only routes ----------------------------------------------------------------------------


def test_pools_prints_one_name_a_line_or_the_json(server: Server) -> None:
    assert ok(run(server.admin_url, "pools")) == "default\n"
    assert json.loads(ok(run(server.admin_url, "--json", "pools"))) == ["default"]


def test_version_prints_aligned_fields_or_the_json(server: Server) -> None:
    out = lines(ok(run(server.admin_url, "version")))
    assert out[0].split() == ["version", __version__]
    assert [line.split()[0] for line in out] == ["version", "build_commit", "build_date"]
    assert len({line.index(line.split()[1]) for line in out}) == 1  # values in one column
    answer = json.loads(ok(run(server.admin_url, "--json", "version")))
    assert answer["version"] == __version__


def test_info_lists_namespaces_with_their_queues(server: Server) -> None:
    token = create_token(server, "cli-info")
    publish(server, token, "cli-info", "q1", b"a")
    publish(server, token, "cli-info", "q2", b"b")
    assert row_of(ok(run(server.admin_url, "info")), "cli-info") == ["cli-info", "q1,", "q2"]
    assert sorted(json.loads(ok(run(server.admin_url, "--json", "info", "--pool", "default")))["cli-info"]) == [
        "q1",
        "q2",
    ]


def test_unknown_pool_is_the_servers_4xx(server: Server) -> None:
    assert failed(run(server.admin_url, "info", "--pool", "nope")) == "token-cli: error: 400 pool not found\n"


# -- tokens ------------------------------------------------------------------------------------------


def test_create_list_and_delete_tokens(server: Server) -> None:
    ns = "cli-tokens"
    random_token = create_token(server, ns)
    assert re.fullmatch(r"[0-9a-f]{32}", random_token)
    chosen = "a-token-chosen-by-the-operator"
    assert create_token(server, ns, "--token", chosen) == chosen
    as_json = json.loads(ok(run(server.admin_url, "--json", "create", ns, "--description", "for machines")))
    assert set(as_json) == {"token"}

    table = lines(ok(run(server.admin_url, "list", ns)))
    assert table[0].split() == ["TOKEN", "DESCRIPTION"]
    assert sorted(line.split()[0] for line in table[1:]) == sorted([random_token, chosen, as_json["token"]])
    assert all(line.index("made by") == table[0].index("DESCRIPTION") for line in table[1:] if "made by" in line)
    listed = json.loads(ok(run(server.admin_url, "--json", "list", ns)))
    assert listed["tokens"][chosen] == "made by a test"

    assert ok(run(server.admin_url, "delete", ns, chosen)) == f"deleted token {chosen}\n"
    assert ok(run(server.admin_url, "--json", "delete", ns, random_token)) == ""  # 204: no body to print
    assert json.loads(ok(run(server.admin_url, "--json", "list", ns)))["tokens"] == {as_json["token"]: "for machines"}


def test_create_and_list_scoped_tokens(server: Server) -> None:
    ns = "cli-scopes"
    scoped = create_token(server, ns, "--scope", "consume,read", "--queues", "orders-*")
    plain = create_token(server, ns)
    table = ok(run(server.admin_url, "list", ns))
    assert lines(table)[0].split() == ["TOKEN", "SCOPE", "QUEUES", "DESCRIPTION"]
    assert row_of(table, scoped) == [scoped, "consume,read", "orders-*", "made", "by", "a", "test"]
    assert row_of(table, plain)[:3] == [plain, "all", "all"]
    refused = run(server.admin_url, "create", ns, "--description", "d", "--scope", "everything")
    assert failed(refused) == "token-cli: error: 400 invalid scope\n"
    response = httpx.put(f"{server.data_url}/api/{ns}/orders-1", params={"token": scoped}, timeout=5)
    assert (response.status_code, response.json()) == (403, {"error": "token scope forbids this"})


def test_list_of_an_empty_namespace_says_so(server: Server) -> None:
    assert ok(run(server.admin_url, "list", "cli-nobody")) == "no tokens\n"


def test_a_4xx_is_one_line_with_the_servers_message(server: Server) -> None:
    result = run(server.admin_url, "create", "cli-bad", "--description", "d", "--token", "short")
    assert failed(result) == "token-cli: error: 400 the user token was too short\n"
    create_token(server, "cli-bad", "--token", "x" * 20)
    result = run(server.admin_url, "create", "cli-bad", "--description", "again", "--token", "x" * 20)
    assert failed(result) == "token-cli: error: 400 the token has already existed\n"


def test_an_unreachable_server_is_one_line_and_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run(url, "pools")
    assert failed(result) == f"token-cli: error: cannot reach the admin API at {url}: Connection refused\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "cli-usage"], "Missing option '--description'"),
        (["limit-set", "ns", "token", "--read", "1", "--write", "1"], "Missing option '--interval'"),
        (["accesslog", "maybe"], "'maybe' is not one of 'enable', 'disable'"),
        (["deadletter-peek", "ns", "q", "--limit", "0"], "Invalid value for '--limit'"),
        (["--admin", "localhost:7778", "pools"], "is not an http:// or https:// URL"),
        (["settings", "ns", "q", "--burst", "2", "--no-burst"], "--burst and --no-burst exclude each other"),
    ],
)
def test_bad_usage_is_clicks_usage_error(args: list[str], message: str) -> None:
    result = run("", *args)
    assert result.returncode == 2
    assert message in result.stderr and "Usage:" in result.stderr


# -- limits ------------------------------------------------------------------------------------------


def test_limit_set_creates_then_updates_and_the_limit_can_be_read_listed_and_deleted(server: Server) -> None:
    ns = "cli-limits"
    token = create_token(server, ns)
    set_args = ["limit-set", ns, token, "--read", "10", "--write", "5", "--interval", "60"]
    assert ok(run(server.admin_url, *set_args)) == f"created the limit of {token}: read 10, write 5 per 60s\n"
    update = ["limit-set", ns, token, "--read", "3", "--write", "4", "--interval", "30"]
    assert ok(run(server.admin_url, *update)) == f"updated the limit of {token}: read 3, write 4 per 30s\n"

    assert ok(run(server.admin_url, "limit-get", ns, token)) == "read 3, write 4 per 30s\n"
    assert json.loads(ok(run(server.admin_url, "--json", "limit-get", ns, token))) == {
        "read": 3,
        "write": 4,
        "interval": 30,
    }
    listed = ok(run(server.admin_url, "limits"))
    assert lines(listed)[0].split() == ["NAMESPACE", "TOKEN", "READ", "WRITE", "INTERVAL"]
    assert row_of(listed, ns) == [ns, token, "3", "4", "30"]
    entries = json.loads(ok(run(server.admin_url, "--json", "limits")))
    assert {"namespace": ns, "token": token, "limiter": {"read": 3, "write": 4, "interval": 30}} in entries

    assert ok(run(server.admin_url, "limit-delete", ns, token)) == f"deleted the limit of {token}\n"
    assert failed(run(server.admin_url, "limit-get", ns, token)).startswith("token-cli: error: 404 ")


def test_limit_set_with_json_prints_the_servers_answer(server: Server) -> None:
    ns = "cli-limits-json"
    token = create_token(server, ns)
    args = ["--json", "limit-set", ns, token, "--read", "1", "--write", "2", "--interval", "3"]
    created = json.loads(ok(run(server.admin_url, *args)))
    assert created["limiter"] == {"read": 1, "write": 2, "interval": 3}
    assert isinstance(json.loads(ok(run(server.admin_url, *args))), dict)  # the PUT's answer, as is


# -- namespaces --------------------------------------------------------------------------------------


def test_namespaces_lists_tokens_timers_and_queues(server: Server) -> None:
    ns = "cli-spaces"
    token = create_token(server, ns)
    create_token(server, ns)
    for body in (b"a", b"b"):
        publish(server, token, ns, "orders", body)
    answer = json.loads(ok(run(server.admin_url, "--json", "namespaces", "--pool", "default")))
    assert answer["pool"] == "default"
    (entry,) = [item for item in answer["namespaces"] if item["namespace"] == ns]
    assert entry["queues"] == [{"queue": "orders", "size": 2, "deadletter_size": 0}]

    table = ok(run(server.admin_url, "namespaces"))
    assert lines(table)[0].split() == ["NAMESPACE", "TOKENS", "TIMER", "QUEUE", "READY", "DEADLETTER"]
    assert row_of(table, ns) == [ns, "2", "0", "orders", "2", "0"]


def test_namespace_delete_asks_first_then_deletes_tokens_and_with_purge_jobs(server: Server) -> None:
    ns = "cli-doomed"
    token = create_token(server, ns)
    publish(server, token, ns, "q", b"job")

    refused = run(server.admin_url, "namespace-delete", ns, stdin="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stderr
    assert token in ok(run(server.admin_url, "list", ns))

    confirmed = run(server.admin_url, "namespace-delete", ns, stdin="y\n")
    assert confirmed.returncode == 0
    assert confirmed.stderr.startswith(f"Delete namespace {ns} of pool default with its tokens and limits?")
    assert confirmed.stdout == f"deleted namespace {ns}: 1 token, 0 limits, 0 jobs\n"
    assert ok(run(server.admin_url, "list", ns)) == "no tokens\n"
    assert ready_size(server, ns, "q") == 1  # without --purge the jobs stay

    answer = json.loads(ok(run(server.admin_url, "--json", "namespace-delete", ns, "--purge", "--yes")))
    assert answer["namespace"] == ns and answer["jobs_deleted"] >= 1
    assert ready_size(server, ns, "q") == 0


# -- dead letters ------------------------------------------------------------------------------------


def test_deadletter_peek_shows_text_decoded_and_binary_as_a_size(server: Server, dead: DeadJobs) -> None:
    out = lines(ok(run(server.admin_url, "deadletter-peek", dead.ns, "peek")))
    assert out[0] == f"{dead.ns}/peek: 3 dead jobs, oldest {dead.text_id}"
    assert out[1].split() == ["JOB_ID", "TTL", "AGE", "ATTRIBUTES", "DATA"]
    rows = {line.split()[0]: line for line in out[2:]}
    assert rows[dead.text_id].endswith("héllo\\nworld")
    assert rows[dead.binary_id].endswith("<4 bytes, binary>")
    assert "trace=abc" in rows[dead.attr_id] and rows[dead.attr_id].endswith("x" * 57 + "...")
    assert len({line.index(line.split()[1]) for line in out[1:]}) == 1  # aligned TTL column


def test_deadletter_peek_json_is_the_servers_answer(server: Server, dead: DeadJobs) -> None:
    answer = json.loads(ok(run(server.admin_url, "--json", "deadletter-peek", dead.ns, "peek", "--limit", "2")))
    assert (answer["namespace"], answer["queue"], answer["deadletter_size"]) == (dead.ns, "peek", 3)
    assert [job["job_id"] for job in answer["jobs"]] == [dead.text_id, dead.binary_id]
    assert base64.b64decode(answer["jobs"][0]["data"]) == "héllo\nworld".encode()


def test_deadletter_respawn_and_delete(server: Server, dead: DeadJobs) -> None:
    out = ok(run(server.admin_url, "deadletter-respawn", dead.ns, "rescue"))
    assert out == f"respawned 1 job of {dead.ns}/rescue\n"
    assert ready_size(server, dead.ns, "rescue") == 1
    args = ["--json", "deadletter-respawn", dead.ns, "rescue", "--ttl", "60", "--pool", "default"]
    assert json.loads(ok(run(server.admin_url, *args))) == {"msg": "respawned", "count": 1}
    assert ready_size(server, dead.ns, "rescue") == 2
    # One of a thing is singular: 1 dead job left.
    assert lines(ok(run(server.admin_url, "deadletter-peek", dead.ns, "rescue")))[0].startswith(
        f"{dead.ns}/rescue: 1 dead job, oldest "
    )

    out = ok(run(server.admin_url, "deadletter-delete", dead.ns, "rescue", "--limit", "5"))
    assert out == f"deleted 1 dead job of {dead.ns}/rescue\n"
    assert deadletter_size(server, dead.ns, "rescue") == 0
    assert json.loads(ok(run(server.admin_url, "--json", "deadletter-delete", dead.ns, "rescue"))) == {
        "msg": "deleted",
        "count": 0,
    }


def test_deadletter_jobs_pages_with_reasons_and_one_job_is_respawned_or_deleted(server: Server) -> None:
    ns = "cli-dead-by-id"
    token = create_token(server, ns)
    for name in ("first", "second", "third"):
        answer = httpx.put(f"{server.data_url}/api/{ns}/q", params={"token": token, "job_id": name}, content=name)
        assert answer.status_code == 201, answer.text
    kill_jobs(server, token, ns, "q", 3)
    page = lines(ok(run(server.admin_url, "deadletter-jobs", ns, "q", "--limit", "2")))
    assert page[0].split() == ["JOB_ID", "ATTEMPTS", "DIED", "LAST_ERROR", "DATA"]
    assert [line.split()[0] for line in page[1:3]] == ["first", "second"]
    assert "ttr passed with no tries left" in page[1] and page[1].endswith("first")
    # When it died, with its offset: not to be read as another zone's time.
    assert re.search(r" \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d ", page[1]), page[1]
    assert page[3] == "more: --after second"
    rest = json.loads(ok(run(server.admin_url, "--json", "deadletter-jobs", ns, "q", "--after", "second")))
    assert [job["job_id"] for job in rest["jobs"]] == ["third"] and rest["next"] is None

    assert (
        ok(run(server.admin_url, "deadletter-respawn-job", ns, "q", "second", "--tries", "3")) == "respawned second\n"
    )
    assert ok(run(server.admin_url, "deadletter-delete-job", ns, "q", "third")) == "deleted third\n"
    assert ready_size(server, ns, "q") == 1 and deadletter_size(server, ns, "q") == 1
    gone = failed(run(server.admin_url, "deadletter-delete-job", ns, "q", "third"))
    assert gone == "token-cli: error: 404 job not found in the dead letter\n"


def test_pause_and_resume_a_queue(server: Server) -> None:
    ns = "cli-paused"
    token = create_token(server, ns)
    publish(server, token, ns, "q", b"held")
    assert ok(run(server.admin_url, "pause", ns, "q")) == f"paused {ns}/q\n"
    consume = httpx.get(f"{server.data_url}/api/{ns}/q", params={"token": token})
    assert consume.status_code == 404
    assert json.loads(ok(run(server.admin_url, "--json", "resume", ns, "q"))) == {"msg": "resumed"}
    assert httpx.get(f"{server.data_url}/api/{ns}/q", params={"token": token}).status_code == 200


# -- access log ----------------------------------------------------------------------------------------


# -- push groups -------------------------------------------------------------------------------------


def test_pushers_are_created_listed_shown_updated_and_deleted(server: Server) -> None:
    ns, url = "cli-push", "http://127.0.0.1:9/hook"  # port 9: nothing answers; no job is published here
    create = ["pusher-create", ns, "hooks", "--queue", "a", "--queue", "b", "--endpoint", url]
    out = ok(run(server.admin_url, *create, "--workers", "4", "--timeout", "30", "--max-attempts", "5"))
    assert out == f"created push group hooks of {ns}\n"
    duplicate = failed(run(server.admin_url, *create, "--workers", "4", "--timeout", "30"))
    assert duplicate.startswith("token-cli: error: 409 ")

    assert row_of(ok(run(server.admin_url, "pushers")), "default") == ["default", ns, "hooks"]
    mine = ok(run(server.admin_url, "pushers", ns))
    assert lines(mine)[0].split() == ["GROUP", "QUEUES", "ENDPOINT", "WORKERS", "TIMEOUT", "MORE"]
    assert row_of(mine, "hooks") == ["hooks", "a,b", url, "4", "30", "max_attempts=5"]

    secret = "0123456789abcdef-secret"
    update = ["pusher-update", ns, "hooks", "--workers", "8", "--backoff-ms", "500", "--backoff-max-ms", "60000"]
    assert (
        ok(run(server.admin_url, *update, env={"LMSTFY_PUSH_SECRET": secret})) == f"updated push group hooks of {ns}\n"
    )
    shown = ok(run(server.admin_url, "pusher-get", ns, "hooks"))
    assert secret not in shown
    assert dict(line.split(None, 1) for line in lines(shown)) == {
        "queues": "a, b",
        "endpoint": url,
        "workers": "8",
        "timeout": "30",
        "backoff": "exponential",
        "backoff_ms": "500",
        "backoff_max_ms": "60000",
        "max_attempts": "5",
        "signed": "True",
    }
    answer = json.loads(ok(run(server.admin_url, "--json", "pusher-get", ns, "hooks")))
    assert answer["pusher"]["queues"] == ["a", "b"] and answer["pusher"]["signed"] is True

    assert "nothing to change" in run(server.admin_url, "pusher-update", ns, "hooks").stderr
    bad = failed(run(server.admin_url, "pusher-update", ns, "hooks", "--endpoint", "ftp://x"))
    assert bad == "token-cli: error: 400 the endpoint should be an http:// or https:// URL\n"

    assert ok(run(server.admin_url, "pusher-delete", ns, "hooks")) == f"deleted push group hooks of {ns}\n"
    assert ok(run(server.admin_url, "pushers", ns)) == "no push groups\n"
    assert failed(run(server.admin_url, "pusher-delete", ns, "hooks")).startswith("token-cli: error: 404 ")


# -- recurring jobs ----------------------------------------------------------------------------------


def test_cron_list_shows_a_namespaces_schedules_and_cron_delete_deletes_one(server: Server) -> None:
    ns = "cli-cron"
    token = create_token(server, ns)
    for queue, name, query in (("a", "nightly", {"cron": "@daily", "tz": "Asia/Tokyo"}), ("b", "beat", {"every": 600})):
        url = f"{server.data_url}/api/{ns}/{queue}/cron/{name}"
        assert httpx.put(url, params={"token": token, **query}, content=b"x").status_code == 201

    table = ok(run(server.admin_url, "cron-list", ns))
    assert lines(table)[0].split() == ["QUEUE", "NAME", "WHEN", "TZ", "NEXT", "LAST", "LAST_JOB"]
    assert row_of(table, "a")[:5] == ["a", "nightly", "0", "0", "*"]  # "0 0 * * *" in its column
    assert row_of(table, "b")[1:5] == ["beat", "every", "600s", "UTC"]
    assert row_of(table, "b")[-2:] == ["-", "-"]  # it never ran
    assert [line.split()[0] for line in lines(ok(run(server.admin_url, "cron-list", ns, "b")))[1:]] == ["b"]
    answer = json.loads(ok(run(server.admin_url, "--json", "cron-list", ns)))
    assert [(s["queue"], s["name"], s["tz"]) for s in answer["schedules"]] == [
        ("a", "nightly", "Asia/Tokyo"),
        ("b", "beat", "UTC"),
    ]

    assert ok(run(server.admin_url, "cron-delete", ns, "a", "nightly")) == f"deleted schedule nightly of {ns}/a\n"
    assert failed(run(server.admin_url, "cron-delete", ns, "a", "nightly")) == (
        "token-cli: error: 404 schedule not found\n"
    )
    assert [s["name"] for s in json.loads(ok(run(server.admin_url, "--json", "cron-list", ns)))["schedules"]] == [
        "beat"
    ]


def test_cron_list_times_carry_their_zone_whatever_the_machines_zone(server: Server) -> None:
    """NEXT and LAST are in the schedule's own tz, with its offset: a TZ far from UTC changes nothing."""
    ns = "cli-cron-zones"
    token = create_token(server, ns)
    for name, query in (("tokyo", {"cron": "@daily", "tz": "Asia/Tokyo"}), ("tick", {"every": 1})):
        url = f"{server.data_url}/api/{ns}/q/cron/{name}"
        assert httpx.put(url, params={"token": token, **query}, content=b"x").status_code == 201
    assert wait_until(lambda: ready_size(server, ns, "q") > 0, timeout=DEAD_TIMEOUT)  # tick ran: it has a LAST

    far = {"TZ": "Pacific/Kiritimati"}  # UTC+14
    table = ok(run(server.admin_url, "cron-list", ns, env=far))
    schedules = {s["name"]: s for s in json.loads(ok(run(server.admin_url, "--json", "cron-list", ns)))["schedules"]}
    tokyo = dt.datetime.fromtimestamp(schedules["tokyo"]["next_ms"] / 1000, ZoneInfo("Asia/Tokyo"))
    assert [cells for cells in (line.split() for line in lines(table)) if cells[1] == "tokyo"] == [
        ["q", "tokyo", "0", "0", "*", "*", "*", "Asia/Tokyo", tokyo.isoformat(timespec="seconds"), "-", "-"]
    ]
    assert tokyo.isoformat(timespec="seconds").endswith("T00:00:00+09:00")
    tick = next(cells for cells in (line.split() for line in lines(table)) if cells[1] == "tick")
    assert tick[:5] == ["q", "tick", "every", "1s", "UTC"]
    for shown in tick[5:7]:  # NEXT, LAST: UTC, said so
        assert shown.endswith("+00:00"), table
        stamp = dt.datetime.fromisoformat(shown).timestamp()
        assert abs(stamp - time.time()) < 60, table


def test_accesslog_reads_and_switches(server: Server) -> None:
    assert ok(run(server.admin_url, "accesslog", "enable")).startswith("access log: ")
    enabled = json.loads(ok(run(server.admin_url, "--json", "accesslog")))
    ok(run(server.admin_url, "accesslog", "disable"))
    disabled = json.loads(ok(run(server.admin_url, "--json", "accesslog")))
    assert set(enabled) == set(disabled) == {"status"}
    assert enabled != disabled
    assert ok(run(server.admin_url, "accesslog")) == f"access log: {disabled['status']}\n"


# -- the script and the environment -------------------------------------------------------------------


def test_scripts_token_cli_runs_the_same_commands(server: Server) -> None:
    assert ok(run(server.admin_url, "pools", script=True)) == "default\n"
    assert ok(run("", "--help", script=True)).startswith("Usage: token-cli [OPTIONS] COMMAND")


def test_the_admin_url_can_come_from_the_environment(server: Server) -> None:
    assert ok(run("", "pools", env={"LMSTFY_ADMIN": server.admin_url})) == "default\n"


# -- basic auth ----------------------------------------------------------------------------------------


def test_without_or_with_a_wrong_password_the_server_refuses(auth_server: Server) -> None:
    assert failed(run(auth_server.admin_url, "list", "cli-auth")).startswith("token-cli: error: 401 ")
    wrong = run(auth_server.admin_url, "--user", USER, "--password", "wrong", "list", "cli-auth")
    assert failed(wrong).startswith("token-cli: error: 401 ")
    no_password = run(auth_server.admin_url, "--user", USER, "list", "cli-auth")
    assert failed(no_password).startswith("token-cli: error: 401 ")


def test_the_right_credentials_work_from_flags_or_environment(auth_server: Server) -> None:
    creds = ["--user", USER, "--password", PASSWORD]
    token = ok(run(auth_server.admin_url, *creds, "create", "cli-auth", "--description", "d")).strip()
    assert token in ok(run(auth_server.admin_url, *creds, "list", "cli-auth"))
    env = {"LMSTFY_ADMIN": auth_server.admin_url, "LMSTFY_ADMIN_USER": USER, "LMSTFY_ADMIN_PASSWORD": PASSWORD}
    assert token in ok(run("", "list", "cli-auth", env=env))


# -- job outcomes (SPEC 13) -------------------------------------------------------------------


def test_settings_shows_and_sets_a_queues_settings(server: Server) -> None:
    ns = "cli-settings"
    assert ok(run(server.admin_url, "settings", ns, "q")) == f"{ns}/q: keep 0s, events off\n"
    assert ok(run(server.admin_url, "settings", ns, "q", "--keep", "3600")) == f"{ns}/q: keep 3600s, events off\n"
    answer = json.loads(
        ok(run(server.admin_url, "--json", "settings", ns, "q", "--events", "100", "--pool", "default"))
    )
    flow = {"max_reserved": 0, "rate": 0, "burst": None, "group_concurrency": 1}  # SPEC 14's, unset
    assert answer == {"namespace": ns, "queue": "q", "keep": 3600, "events": 100, **flow}
    assert failed(run(server.admin_url, "settings", ns, "q", "--keep", "-1", "--events", "5")) == (
        "token-cli: error: 400 invalid keep\n"
    )
    assert ok(run(server.admin_url, "settings", ns, "q")) == f"{ns}/q: keep 3600s, events 100\n"
    settings = httpx.get(f"{server.data_url}/api/{ns}/q/settings", params={"token": create_token(server, ns)})
    assert settings.json()["keep"] == 3600


def test_settings_sets_and_unsets_the_flow_control_limits(server: Server) -> None:
    ns = "cli-limits"
    limits = ["--max-reserved", "5", "--rate", "2.5", "--burst", "10", "--group-concurrency", "3"]
    assert ok(run(server.admin_url, "settings", ns, "q", *limits)) == (
        f"{ns}/q: keep 0s, events off, max_reserved 5, rate 2.5/s, burst 10, group_concurrency 3\n"
    )
    assert ok(run(server.admin_url, "settings", ns, "q", "--no-burst", "--max-reserved", "0")) == (
        f"{ns}/q: keep 0s, events off, max_reserved unlimited, rate 2.5/s, burst default, group_concurrency 3\n"
    )
    assert "rate 0.00001/s," in ok(run(server.admin_url, "settings", ns, "q", "--rate", "0.00001"))  # no exponent
    refused = run(server.admin_url, "settings", ns, "q", "--group-concurrency", "1", "--rate", "fast")
    assert failed(refused) == "token-cli: error: 400 invalid rate\n"
    answer = json.loads(ok(run(server.admin_url, "--json", "settings", ns, "q")))
    assert (answer["max_reserved"], answer["burst"], answer["group_concurrency"]) == (0, None, 3)


def test_promote_makes_a_delayed_job_ready(server: Server) -> None:
    ns = "cli-promote"
    token = create_token(server, ns)
    answer = httpx.put(f"{server.data_url}/api/{ns}/q", params={"token": token, "delay": 600}, content=b"x")
    job_id = answer.json()["job_id"]
    assert ready_size(server, ns, "q") == 0
    assert ok(run(server.admin_url, "promote", ns, "q", job_id, "--pool", "default")) == f"promoted {job_id}\n"
    assert ready_size(server, ns, "q") == 1
    assert failed(run(server.admin_url, "promote", ns, "q", job_id)) == "token-cli: error: 409 job is not delayed\n"
    assert failed(run(server.admin_url, "promote", ns, "q", "nosuchjob")) == "token-cli: error: 404 job not found\n"
