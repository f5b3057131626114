"""Recurring jobs' bad input and limits (SPEC section 9), through real `lmstfy-py serve` processes:
a tz zoneinfo cannot read is a 400 (never the 503 of an OSError taken for a Redis fault), on the
data port and in the dashboard's form; a namespace holds at most `max_schedules_per_namespace`
schedules, however many requests race; `every` has a floor, `min_schedule_every`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from html import unescape
from pathlib import Path
from typing import Any

import httpx

from benchmarks.harness.lmstfy_servers import Server, create_token

NS, QUEUE = "sched", "q"
TZ_ERROR_END = "is not an IANA time zone (like Europe/Paris)"
# Each fails in zoneinfo its own way: a folder (IsADirectoryError), a name too long for the file
# system (OSError ENAMETOOLONG), a path (ValueError), a NUL byte (ValueError), unknown (KeyError),
# a file of the zoneinfo folder that is not a zone (ValueError).
BAD_TZS = [
    "America",
    "Europe",
    "Etc",
    "__pycache__",
    "x" * 300,
    "Europe/" + "x" * 300,
    "../../../../etc/passwd",
    "America/../Europe/Paris",
    "/etc/localtime",
    "/usr/share/zoneinfo/UTC",
    "Europe/Paris\x00",
    "Europe/",
    "Mars/Base",
    "zone.tab",
]
_FORM_TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
_FORM_ERROR = re.compile(r'id="form-error">([^<]*)<')


@contextmanager
def served(tmp_path: Path, redis_url: str, http_server: str, server_toml: str = "") -> Iterator[Server]:
    """A server on the test Redis; with `server_toml`, those [server] keys from a config file."""
    config = None
    if server_toml:
        config = tmp_path / "lmstfy.toml"
        config.write_text(f"[server]\n{server_toml}\n")
    with Server(tmp_path, redis_url=redis_url, config=config, args=["--workers", "2"], http_server=http_server) as s:
        yield s.start()


def put(server: Server, token: str, name: str, queue: str = QUEUE, ns: str = NS, **query: Any) -> httpx.Response:
    url = f"{server.data_url}/api/{ns}/{queue}/cron/{name}"
    return httpx.put(url, params=query, headers={"X-Token": token}, content=b"tick", timeout=10)


def stored(server: Server, ns: str = NS) -> list[tuple[str, str]]:
    """The namespace's schedules as the admin API lists them: (queue, name)."""
    answer = httpx.get(f"{server.admin_url}/cron/{ns}", timeout=10)
    assert answer.status_code == 200, answer.text
    return [(s["queue"], s["name"]) for s in answer.json()["schedules"]]


def dashboard_save(admin: httpx.Client, **form: str) -> httpx.Response:
    """Posts the dashboard's schedule form, with the CSRF token of its page."""
    page = admin.get("/ui/cron")
    assert page.status_code == 200, page.text
    found = _FORM_TOKEN.search(page.text)
    assert found is not None
    fields = {"csrf": found.group(1), "namespace": NS, "queue": QUEUE, "catchup": "one", "data": "tick", **form}
    return admin.post("/ui/cron/save", data=fields)


def form_error(page: str) -> str:
    found = _FORM_ERROR.search(page)
    assert found is not None, page
    return unescape(found.group(1))


def test_a_tz_zoneinfo_cannot_read_is_a_400_and_stores_nothing(
    tmp_path: Path, redis_url: str, http_server: str
) -> None:
    with served(tmp_path, redis_url, http_server) as server, httpx.Client(base_url=server.admin_url) as admin:
        token = create_token(server, NS)
        for tz in BAD_TZS:
            answer = put(server, token, "daily", cron="@daily", tz=tz)
            assert answer.status_code == 400, (tz[:20], answer.status_code, answer.text)
            error = answer.json()["error"]
            assert error.startswith("invalid tz: '") and error.endswith(TZ_ERROR_END), (tz[:20], error)
            page = dashboard_save(admin, name="daily", cron="@daily", tz=tz)
            assert page.status_code == 400, (tz[:20], page.status_code)
            assert form_error(page.text) == error  # the API's text, shown above the form
        unknown = put(server, token, "a", every=60, tz="Mars/Base").json()
        assert unknown == {"error": "invalid tz: 'Mars/Base' " + TZ_ERROR_END}  # the text it always had
        assert len(put(server, token, "a", every=60, tz="x" * 300).json()["error"]) < 150  # not the whole name back
        assert stored(server) == []
        # Names as IANA spells them still pass.
        for name, tz in [("a", "Europe/Paris"), ("b", "Etc/GMT+5"), ("c", "America/Port-au-Prince"), ("d", "UTC")]:
            assert put(server, token, name, cron="0 9 * * *", tz=tz).status_code == 201, tz
        assert dashboard_save(admin, name="e", cron="@daily", tz="America/Argentina/Buenos_Aires").status_code == 303
        assert stored(server) == [(QUEUE, name) for name in "abcde"]


def test_a_namespace_holds_at_most_max_schedules_per_namespace(
    tmp_path: Path, redis_url: str, http_server: str
) -> None:
    with (
        served(tmp_path, redis_url, http_server, "max_schedules_per_namespace = 3") as server,
        httpx.Client(base_url=server.admin_url) as admin,
    ):
        token = create_token(server, NS)
        assert [put(server, token, name, every=60).status_code for name in ("s1", "s2")] == [201, 201]
        assert put(server, token, "s3", queue="other", every=60).status_code == 201  # the cap is the namespace's
        refused = put(server, token, "s4", every=60)
        assert (refused.status_code, refused.json()) == (409, {"error": "too many schedules in namespace (max 3)"})
        page = dashboard_save(admin, name="s5", every="60")
        assert page.status_code == 409 and form_error(page.text) == "too many schedules in namespace (max 3)"
        assert stored(server) == [("other", "s3"), (QUEUE, "s1"), (QUEUE, "s2")]  # by queue, then name

        replaced = put(server, token, "s1", every=120)  # replacing one at the cap stays allowed
        assert replaced.status_code == 200, replaced.text
        one = httpx.get(f"{server.data_url}/api/{NS}/{QUEUE}/cron/s1", headers={"X-Token": token}, timeout=10)
        assert one.json()["every"] == 120
        assert dashboard_save(admin, name="s2", every="90").status_code == 303  # and from the dashboard

        deleted = httpx.delete(f"{server.data_url}/api/{NS}/{QUEUE}/cron/s2", headers={"X-Token": token}, timeout=10)
        assert deleted.status_code == 204
        assert put(server, token, "s4", every=60).status_code == 201  # a place was freed
        assert put(server, token, "s5", every=60).status_code == 409
        assert stored(server) == [("other", "s3"), (QUEUE, "s1"), (QUEUE, "s4")]

        other = create_token(server, "other-ns")
        assert put(server, other, "s1", ns="other-ns", every=60).status_code == 201  # another namespace's own cap


def test_racing_registrations_never_pass_the_cap(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with served(tmp_path, redis_url, http_server, "max_schedules_per_namespace = 3") as server:
        token = create_token(server, NS)
        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(lambda i: put(server, token, f"r{i}", every=60).status_code, range(32)))
        assert sorted(answers) == [201] * 3 + [409] * 29
        assert len(stored(server)) == 3


def test_every_has_a_configured_floor(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with served(tmp_path, redis_url, http_server, "min_schedule_every = 5") as server:
        token = create_token(server, NS)
        for every in (1, 2, 4):
            refused = put(server, token, "fast", every=every)
            assert (refused.status_code, refused.json()) == (
                400,
                {"error": "invalid every: must be at least 5 seconds"},
            )
        assert put(server, token, "fast", every=0).json() == {"error": "invalid every"}
        assert stored(server) == []
        assert put(server, token, "fast", every=5).status_code == 201


def test_every_is_at_least_one_second_by_default(tmp_path: Path, redis_url: str, http_server: str) -> None:
    with served(tmp_path, redis_url, http_server) as server:
        token = create_token(server, NS)
        for every in ("0", "0.5", "-1"):  # whole seconds, at least 1, as before
            refused = put(server, token, "fast", every=every)
            assert (refused.status_code, refused.json()) == (400, {"error": "invalid every"}), every
        assert stored(server) == []
        assert put(server, token, "fast", every=1).status_code == 201
