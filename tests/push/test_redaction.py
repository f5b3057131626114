"""A push endpoint's credentials (user-info, query) are the admin's: a failed delivery's last_error,
which every holder of the namespace's token reads, shows the endpoint without them, as do the dead
letter listings, the dashboard's pages and the server's output; the admin's GET of the pusher keeps
the endpoint as entered."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import free_port
from lmstfy_py.push import shown
from tests.push.helpers import NS, create_pusher, create_token, dead, publish, served

PASSWORD, API_KEY = "S3CRET-pw", "K3Y-apikey"


def test_a_failed_push_shows_no_credentials(tmp_path: Path, http_server: str) -> None:
    port = free_port()  # nothing listens: the delivery fails
    endpoint = f"http://user:{PASSWORD}@127.0.0.1:{port}/hook?apikey={API_KEY}"
    with served(tmp_path, http_server) as server:
        token = create_token(server, NS)
        create_pusher(server, "g", endpoint, "q", max_attempts=1, timeout=1)
        job_id = publish(server, token, "q")
        state = dead(server, token, "q", job_id)
        assert state["last_error"] == f"push to http://***@127.0.0.1:{port}/hook?***: unreachable"

        api, admin = server.data_url, server.admin_url
        shown = {
            "job state": httpx.get(f"{api}/api/{NS}/q/job/{job_id}", params={"token": token}),
            "dead letter": httpx.get(f"{api}/api/{NS}/q/deadletter/jobs", params={"token": token}),
            "admin dead letter": httpx.get(f"{admin}/deadletter/{NS}/q/jobs"),
            "dashboard dead letter": httpx.get(f"{admin}/ui/deadletter/{NS}/q"),
            "dashboard job": httpx.get(f"{admin}/ui/queue/{NS}/q", params={"job_id": job_id}),
        }
        for what, answer in shown.items():
            assert answer.status_code == 200, (what, answer.text)
            assert f"127.0.0.1:{port}/hook" in answer.text, what  # the job and its reason are there...
            assert PASSWORD not in answer.text and API_KEY not in answer.text, what  # ...without the secrets

        configured = httpx.get(f"{admin}/pusher/{NS}/g").json()["pusher"]
        assert configured["endpoint"] == endpoint  # the admin's own configuration, as entered
        server.stop()
    output = server.stderr() + server.stdout()
    assert PASSWORD not in output and API_KEY not in output


def test_a_reason_stored_with_credentials_is_shown_without(tmp_path: Path, http_server: str) -> None:
    """A job buried before this fix kept the endpoint whole in its last_error: it is shown redacted."""
    stored = f"push to https://bot:{PASSWORD}@hooks.example:8443/in?apikey={API_KEY}&x=1: HTTP 503"
    with served(tmp_path, http_server) as server:
        token = create_token(server, NS)
        job_id = publish(server, token, "old")
        consumed = httpx.get(f"{server.data_url}/api/{NS}/old", params={"token": token, "timeout": 0})
        assert consumed.status_code == 200 and consumed.json()["job_id"] == job_id, consumed.text
        buried = httpx.put(
            f"{server.data_url}/api/{NS}/old/job/{job_id}/bury", params={"token": token, "reason": stored}
        )
        assert buried.status_code == 200, buried.text

        state = dead(server, token, "old", job_id)
        assert state["last_error"] == "push to https://***@hooks.example:8443/in?***: HTTP 503"
        listing = httpx.get(f"{server.data_url}/api/{NS}/old/deadletter/jobs", params={"token": token})
        page = httpx.get(f"{server.admin_url}/ui/deadletter/{NS}/old")
        for answer in (listing, page):
            assert "hooks.example:8443/in" in answer.text
            assert PASSWORD not in answer.text and API_KEY not in answer.text


@pytest.mark.parametrize(
    ("entered", "shown_as"),
    [
        ("http://billing:8080/jobs", "http://billing:8080/jobs"),
        ("https://user@hooks.example/in", "https://***@hooks.example/in"),
        ("http://u:p@[::1]:9000/x?token=t#frag", "http://***@[::1]:9000/x?***"),
        ("http://h/x?", "http://h/x?***"),
        ("http://h/a@b/c", "http://h/a@b/c"),  # an @ in the path is no user-info
    ],
)
def test_an_endpoint_is_shown_without_user_info_and_query(entered: str, shown_as: str) -> None:
    assert shown.endpoint(entered) == shown_as
    assert shown.reason(f"push to {entered}: timeout") == f"push to {shown_as}: timeout"
