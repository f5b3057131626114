"""An lmstfy operator's switch (SPEC section 12), end to end: a Redis written exactly as lmstfy
1.0.10 leaves it (tests/lmstfy_layout.py), then `lmstfy-py serve` on it. Every queued job, token
and limit is there; the log says what was found and, once everything moved, that nothing is left.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.lmstfy_layout import Limit, LmstfyAdmin, LmstfyPool
from tests.redis_procs import RedisProcess
from tests.servers import Server, wait_until

NS = "shop"


@pytest.fixture
def lmstfy_redis(redis_url: str) -> Iterator[tuple[LmstfyPool, LmstfyAdmin]]:
    client = redis.Redis.from_url(redis_url)
    yield LmstfyPool(client), LmstfyAdmin(client)  # lmstfy's default: the admin Redis is the data pool's
    client.close()


def test_lmstfy_py_serves_what_lmstfy_left_with_its_tokens_and_limits(
    tmp_path: Path, redis_url: str, lmstfy_redis: tuple[LmstfyPool, LmstfyAdmin]
) -> None:
    pool, admin = lmstfy_redis
    now = int(time.time())
    ready = {pool.publish(NS, "orders", b"order %d" % i, ttl=3600, tries=3, now=now): b"order %d" % i for i in range(5)}
    delayed = pool.publish(NS, "orders", b"in a second", delay=1, now=now)
    token = admin.create_token(NS, "billing workers")
    limited = admin.create_token(NS, "a limited one")
    admin.set_limit(NS, limited, Limit(read=2, write=0, interval=60))

    with Server(tmp_path, redis_url=redis_url, args=["--workers", "1"]) as server:
        server.start()
        api = f"{server.data_url}/api/{NS}/orders"
        got = {}
        for _ in range(6):
            answer = httpx.get(api, params={"token": token, "timeout": 3, "ttr": 30})
            assert answer.status_code == 200, answer.text
            job = answer.json()
            got[job["job_id"]] = job
            assert httpx.delete(f"{api}/job/{job['job_id']}", params={"token": token}).status_code == 204
        assert set(got) == {*ready, delayed}
        for job_id, body in ready.items():
            assert (got[job_id]["remain_tries"], 3590 <= got[job_id]["ttl"] <= 3600) == (2, True)
            assert base64.b64decode(got[job_id]["data"]) == body
        # lmstfy's limit holds for its token: 2 consumes a minute (a consume that finds nothing is not counted).
        for _ in range(3):
            assert httpx.put(api, params={"token": token}, content=b"new").status_code == 201
        statuses = [httpx.get(api, params={"token": limited, "timeout": 0}).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        tokens = httpx.get(f"{server.admin_url}/token/{NS}").json()["tokens"]
        assert tokens == {token: "billing workers", limited: "a limited one"}
        assert NS in [n["namespace"] for n in httpx.get(f"{server.admin_url}/namespaces").json()["namespaces"]]
        assert wait_until(lambda: "nothing of lmstfy's layout remains" in server.stderr(), 10), server.stderr()
    log = server.stderr()
    # The delayed job is on lmstfy's timer at the first look, or already moved if the server took a second to start.
    assert re.search(r"pool default holds jobs lmstfy left \(5 ready, [01] on its timer, 0 dead\)", log), log
    assert "from lmstfy's admin keys: 1 namespaces with tokens, 1 limits" in log


def test_lmstfys_data_in_a_redis_away_at_start_is_served_once_it_answers(tmp_path: Path) -> None:
    """Format "auto" cannot look at a Redis that is down at start: the pool is served as if it held
    lmstfy's data, and the first look once Redis answers settles it (and takes in lmstfy's limits)."""
    redis_process = RedisProcess(tmp_path / "redis")  # its port is chosen, nothing listens there yet
    with Server(tmp_path, redis_url=redis_process.url, args=["--workers", "1"]) as server:
        try:
            server.start()
            redis_process.start()
            client = redis.Redis.from_url(redis_process.url)
            job_id = LmstfyPool(client).publish(NS, "orders", b"left by lmstfy", ttl=3600, tries=3)
            token = LmstfyAdmin(client).create_token(NS, "billing workers")
            LmstfyAdmin(client).set_limit(NS, token, Limit(read=0, write=1, interval=60))
            answer = httpx.get(f"{server.data_url}/api/{NS}/orders", params={"token": token, "timeout": 10})
            assert answer.status_code == 200, answer.text
            assert (answer.json()["job_id"], base64.b64decode(answer.json()["data"])) == (job_id, b"left by lmstfy")
            assert wait_until(
                lambda: "from lmstfy's admin keys: 1 namespaces with tokens, 1 limits" in server.stderr(), 10
            )
            client.close()
        finally:
            redis_process.stop()
    assert "Traceback" not in server.stderr(), server.stderr()
