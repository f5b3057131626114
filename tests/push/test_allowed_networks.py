"""`[push] allowed_networks`: a push endpoint reaches only addresses inside them, checked on every
connect, after DNS, for names and IP literals alike (the forms that spell loopback otherwise too):
anything else is a failed delivery ("address not allowed"), the endpoint never reached, its
credentials never in the reason."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fixtures.push_endpoints import Endpoints
from tests.push.helpers import NS, create_pusher, create_token, dead, eventually, job_state, publish, served

ONLY_TEN = '[push]\nallowed_networks = ["10.0.0.0/8"]\n'
WITH_LOOPBACK = '[push]\nallowed_networks = ["10.0.0.0/8", "127.0.0.0/8"]\n'


def test_an_endpoint_outside_the_allowed_networks_is_never_reached(tmp_path: Path, http_server: str) -> None:
    with Endpoints.in_thread() as endpoints, served(tmp_path, http_server, ONLY_TEN) as server:
        port = endpoints.port
        admin_port = server.admin_port
        targets = {
            "loopback": f"http://user:S3CRET@127.0.0.1:{port}/ok?apikey=K3Y",
            "name": f"http://localhost:{port}/ok",
            "hex": f"http://0x7f.1:{port}/ok",  # a name to aiohttp, 127.0.0.1 to getaddrinfo
            "decimal": f"http://2130706433:{port}/ok",  # 127.0.0.1 as one number
            "mapped": f"http://[::ffff:127.0.0.1]:{port}/ok",
            "any": f"http://0.0.0.0:{port}/ok",
            # Its own admin port: a push there would create a token.
            "admin": f"http://127.0.0.1:{admin_port}/token/{NS}?description=pushed",
        }
        token = create_token(server, NS)
        for queue, endpoint in targets.items():
            create_pusher(server, queue, endpoint, queue, max_attempts=1, timeout=2)
        job_ids = {queue: publish(server, token, queue) for queue in targets}
        reasons = {queue: dead(server, token, queue, job_id)["last_error"] for queue, job_id in job_ids.items()}
        tokens = httpx.get(f"{server.admin_url}/token/{NS}").json()["tokens"]

    assert endpoints.received == []
    assert "pushed" not in tokens.values()
    assert reasons["loopback"] == f"push to http://***@127.0.0.1:{port}/ok?***: address not allowed"
    for queue in ("name", "hex", "mapped", "any", "admin"):
        assert reasons[queue].endswith(": address not allowed"), reasons
    # aiohttp refuses a non-canonical IPv4 literal before any connect (and the check would refuse it too).
    assert reasons["decimal"].endswith((": address not allowed", ": unreachable")), reasons
    assert "S3CRET" not in str(reasons) and "K3Y" not in str(reasons)


def test_an_endpoint_inside_the_allowed_networks_is_delivered(tmp_path: Path, http_server: str) -> None:
    with Endpoints.in_thread() as endpoints, served(tmp_path, http_server, WITH_LOOPBACK) as server:
        token = create_token(server, NS)
        create_pusher(server, "local", endpoints.url("/ok"), "q", max_attempts=1)
        create_pusher(server, "named", f"http://localhost:{endpoints.port}/ok", "named", max_attempts=1)
        job_ids = [publish(server, token, "q"), publish(server, token, "named")]
        eventually(lambda: sorted(endpoints.job_ids()) == sorted(job_ids), 10, "both jobs delivered")

        def acked() -> bool:
            answers = [job_state(server, token, q, i) for q, i in zip(["q", "named"], job_ids, strict=True)]
            return [answer.status_code for answer in answers] == [404, 404]

        eventually(acked, 10, "both jobs ACKed")
