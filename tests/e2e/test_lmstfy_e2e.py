"""An lmstfy operator's switch (SPEC section 12), end to end: a Redis written exactly as lmstfy
1.0.10 leaves it (tests/fixtures/lmstfy_layout.py), then `lmstfy-py serve` on it. Every queued job, token
and limit is there; the log says what was found and, once everything moved, that nothing is left.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from benchmarks.harness.lmstfy_servers import Server, create_token, free_port, free_port_besides, wait_until
from benchmarks.harness.redis_servers import RedisProcess
from tests.e2e.test_lmstfy_compat import AUTH, lmstfy_conf
from tests.fixtures.lmstfy_layout import Limit, LmstfyAdmin, LmstfyPool, Pusher, ready_key
from tests.fixtures.push_endpoints import Endpoints

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
    # The delayed job is on lmstfy's timer at the first look, or already moved if the server took a second to
    # start; the mover's first look runs beside the first requests, which a loaded machine may serve first
    # (a CI run counted 4 ready: the first consume had taken one).
    assert re.search(r"pool default holds jobs lmstfy left \([1-5] ready, [01] on its timer, 0 dead\)", log), log
    assert "from lmstfy's admin keys: 1 namespaces with tokens, 1 limits" in log


def test_lmstfys_data_in_a_redis_away_at_start_is_served_once_it_answers(tmp_path: Path) -> None:
    """Format "auto" cannot look at a Redis that is down at start: the pool is served as if it held
    lmstfy's data, and the looks once Redis answers settle it (and take in lmstfy's limits)."""
    redis_process = RedisProcess(tmp_path / "redis")  # its port is chosen, nothing listens there yet
    with Server(tmp_path, redis_url=redis_process.url, args=["--workers", "1"]) as server:
        try:
            server.start()
            redis_process.start()
            client = redis.Redis.from_url(redis_process.url)
            # The job last: a look that finds it finds the token and the limit too. (A look between
            # Redis's start and these writes finds nothing; the next one, 5 s later, finds them.)
            token = LmstfyAdmin(client).create_token(NS, "billing workers")
            LmstfyAdmin(client).set_limit(NS, token, Limit(read=0, write=1, interval=60))
            job_id = LmstfyPool(client).publish(NS, "orders", b"left by lmstfy", ttl=3600, tries=3)
            assert wait_until(
                lambda: "from lmstfy's admin keys: 1 namespaces with tokens, 1 limits" in server.stderr(), 10
            )
            query = {"token": token, "timeout": 10}
            answer = httpx.get(f"{server.data_url}/api/{NS}/orders", params=query, timeout=15)
            assert answer.status_code == 200, answer.text
            assert (answer.json()["job_id"], base64.b64decode(answer.json()["data"])) == (job_id, b"left by lmstfy")
            client.close()
        finally:
            redis_process.stop()
    assert "Traceback" not in server.stderr(), server.stderr()


# -- lmstfy's config file, on the Redis lmstfy left ---------------------------------------------


def lmstfy_conf_with_logs(redis_port: int, port: int, admin_port: int, log_dir: Path) -> str:
    """An lmstfy 1.0.10 config file (its demo-conf.toml's shape) writing JSON logs to `log_dir`."""
    logs = f'LogDir = "{log_dir}"\nLogFormat = "json"'
    return lmstfy_conf(redis_port, port, admin_port, extra=logs)


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]  # any line that is not JSON fails the test


def test_lmstfys_config_file_starts_the_server_on_that_redis(
    tmp_path: Path, redis_url: str, redis_server: RedisProcess
) -> None:
    """lmstfy stopped, lmstfy-py started with lmstfy's own config file on lmstfy's Redis: its ready
    jobs, delayed job, dead letter, tokens, limit and pusher are all there, and it logs as lmstfy."""
    client = redis.Redis.from_url(redis_url)
    pool, admin = LmstfyPool(client), LmstfyAdmin(client)
    now = int(time.time())
    ready = {pool.publish(NS, "orders", b"order %d" % i, ttl=3600, tries=3, now=now): b"order %d" % i for i in range(5)}
    due_s = now + 6  # well after the server has started
    delayed = pool.publish(NS, "later", b"in six seconds", ttl=3600, tries=2, delay=due_s - now, now=now)
    dead = pool.publish(NS, "failed", b"died under lmstfy", ttl=3600, now=now)
    client.rpop(ready_key(NS, "failed"))
    pool.bury(NS, "failed", dead)
    pushed = pool.publish(NS, "hooks", b"to be pushed", ttl=3600, now=now)
    token = admin.create_token(NS, "billing workers")
    limited = admin.create_token(NS, "a limited one")
    admin.set_limit(NS, limited, Limit(read=2, write=0, interval=60))
    log_dir = tmp_path / "logs"
    port = free_port()
    admin_port = free_port_besides(port)
    config = tmp_path / "lmstfy.toml"
    config.write_text(lmstfy_conf_with_logs(redis_server.port, port, admin_port, log_dir))

    with Endpoints.in_thread() as endpoints, ThreadPoolExecutor(1) as threads:
        admin.create_pusher(NS, "hooks", Pusher(("hooks",), endpoints.url("/ok"), workers=2, timeout=5))
        server = Server(tmp_path, port=port, admin_port=admin_port, config=config, config_flag="-c", own_flags=False)
        with server:
            server.start()
            api = f"{server.data_url}/api/{NS}"
            # Waiting for the delayed job from before it is due, while the rest goes on.
            waiting = threads.submit(wait_for_job, f"{api}/later", token, due_s - time.time() + 5)
            assert time.time() < due_s, "the server took too long to start for the delayed job's check"
            # Every ready job once, with its id, data, ttl and the tries left after this delivery.
            got = {}
            for _ in range(len(ready)):
                job = httpx.get(f"{api}/orders", params={"token": token, "ttr": 30}).json()
                got[job["job_id"]] = job
                assert httpx.delete(f"{api}/orders/job/{job['job_id']}", params={"token": token}).status_code == 204
            assert set(got) == set(ready)
            for job_id, body in ready.items():
                assert base64.b64decode(got[job_id]["data"]) == body
                assert (got[job_id]["remain_tries"], 3590 <= got[job_id]["ttl"] <= 3600) == (2, True)
            assert httpx.get(f"{api}/orders", params={"token": token}).status_code == 404  # none twice
            # lmstfy's dead letter: seen, respawned, consumed.
            head = httpx.get(f"{api}/failed/deadletter", params={"token": token}).json()
            assert (head["deadletter_size"], head["deadletter_head"]) == (1, dead)
            respawn = httpx.put(f"{api}/failed/deadletter", params={"token": token, "limit": 1, "ttl": 600})
            assert respawn.json()["count"] == 1
            job = httpx.get(f"{api}/failed", params={"token": token, "ttr": 30}).json()
            assert (job["job_id"], base64.b64decode(job["data"]), 590 <= job["ttl"] <= 600) == (
                dead,
                b"died under lmstfy",
                True,
            )
            # lmstfy's limit holds for its token: 2 consumes a minute.
            for _ in range(3):
                assert httpx.put(f"{api}/limited", params={"token": token}, content=b"x").status_code == 201
            statuses = [httpx.get(f"{api}/limited", params={"token": limited}).status_code for _ in range(3)]
            assert statuses == [200, 200, 429]
            # lmstfy's pusher: listed, and pushing its queue (the job lmstfy left there).
            pushers = httpx.get(f"{server.admin_url}/pushers", auth=AUTH).json()
            assert pushers == {"pushers": {"default": {NS: ["hooks"]}}}
            shown = httpx.get(f"{server.admin_url}/pusher/{NS}/hooks", auth=AUTH).json()["pusher"]
            assert (shown["queues"], shown["endpoint"], shown["workers"]) == (["hooks"], endpoints.url("/ok"), 2)
            assert wait_until(lambda: endpoints.job_ids() == [pushed], 10), endpoints.job_ids()
            # The delayed job, on lmstfy's whole-second time.
            job, arrived = waiting.result()
            assert (job["job_id"], job["remain_tries"]) == (delayed, 1)
            assert due_s <= arrived < due_s + 1.2
            # Every Redis command is counted, under the pool's address (lmstfy >= 1.0.11's families).
            node = f"127.0.0.1:{redis_server.port}"
            assert wait_until(lambda: steps_run(server, node) >= 12, 5)
            assert wait_until(lambda: "nothing of lmstfy's layout remains" in (log_dir / "error.log").read_text(), 10)
    client.close()
    # The logs: JSON lines in LogDir, access lines naming pool, namespace and queue.
    access = json_lines(log_dir / "access.log")
    consumes = [line for line in access if line["method"] == "GET" and line["path"] == f"/api/{NS}/orders"]
    assert len(consumes) == len(ready) + 1
    assert {(line["pool"], line["namespace"], line["queue"]) for line in consumes} == {("default", NS, "orders")}
    assert {line["code"] for line in consumes} == {200, 404}
    errors = json_lines(log_dir / "error.log")
    # (Each worker's first look; the pusher may have taken its job, another worker the dead one, first.)
    found = re.compile(r"pool default holds jobs lmstfy left \([56] ready, 1 on its timer, [01] dead\)")
    assert any(found.search(line["msg"]) for line in errors), errors
    assert not [line for line in errors if line["level"] == "error"], errors


def wait_for_job(url: str, token: str, timeout_s: float) -> tuple[dict[str, Any], float]:
    """One long-poll consume: the job and when it arrived (time.time())."""
    answer = httpx.get(url, params={"token": token, "timeout": int(timeout_s) + 1, "ttr": 30}, timeout=timeout_s + 5)
    assert answer.status_code == 200, answer.text
    return answer.json(), time.time()


def steps_run(server: Server, node: str) -> float:
    """The script steps (FCALL, or EVALSHA on a Redis without functions) the server's workers sent
    to `node`, as its /metrics (public, as lmstfy's) says."""
    text = httpx.get(f"{server.admin_url}/metrics").text
    counted = re.findall(
        rf'^infra_lmstfy_redis_qps{{command="(?:fcall|evalsha)",node="{node}",status="ok"}} (\S+)$', text, re.M
    )
    return sum(float(count) for count in counted)


# -- a rolling switch: lmstfy and lmstfy-py on one Redis at once -------------------------------

ROLLING_TRIES = 3
ROLLING_TTR_S = 3  # every worker ACKs at once; a job abandoned by its worker comes back after this
ABANDON_ONE_IN = 6  # a worker of either side abandons the first delivery of one job in six


@dataclass
class Ledger:
    """What the workers of both sides were given and ACKed (threads share it)."""

    published: dict[str, bytes] = field(default_factory=dict)
    deliveries: Counter[str] = field(default_factory=Counter)
    by_side: Counter[str] = field(default_factory=Counter)
    # (job id, body, tries left, which delivery of the job): a job may be delivered before its publish returns
    seen: list[tuple[str, bytes, int, int]] = field(default_factory=list)
    acks: Counter[str] = field(default_factory=Counter)
    abandoned: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, job_id: str, body: bytes) -> None:
        with self.lock:
            self.published[job_id] = body

    def delivered(self, side: str, job_id: str, body: bytes, remain_tries: int) -> bool:
        """Records one delivery; whether the worker should ACK it (else it abandons it)."""
        with self.lock:
            self.deliveries[job_id] += 1
            self.by_side[side] += 1
            nth = self.deliveries[job_id]
            self.seen.append((job_id, body, remain_tries, nth))
            if nth == 1 and int(hashlib.sha256(job_id.encode()).hexdigest(), 16) % ABANDON_ONE_IN == 0:
                self.abandoned.add(job_id)
                return False
            return True

    def acked(self, job_id: str) -> None:
        with self.lock:
            self.acks[job_id] += 1

    def all_acked(self) -> bool:
        with self.lock:
            return set(self.acks) == set(self.published)

    def wrong_deliveries(self) -> list[tuple[str, bytes, int, int]]:
        """Deliveries whose body is not the one published, or whose tries left do not count down."""
        return [d for d in self.seen if d[1] != self.published.get(d[0]) or d[2] != ROLLING_TRIES - d[3]]


@dataclass
class LmstfySide:
    """lmstfy still running: its publishes, consumes, ACKs and timer pump, as tests/fixtures/lmstfy_layout.py
    does them."""

    lmstfy: LmstfyPool
    ledger: Ledger
    stop: threading.Event

    def publish(self, count: int, pause_s: float) -> None:
        for i in range(count):
            body = b"lmstfy %d" % i
            job_id = self.lmstfy.publish(NS, "q", body, ttl=600, tries=ROLLING_TRIES, delay=int(i % 3 == 0))
            self.ledger.add(job_id, body)
            time.sleep(pause_s)

    def work(self) -> None:
        while not self.stop.is_set():
            job = self.lmstfy.reserve(NS, ["q"], ttr=ROLLING_TTR_S)
            if job is None:
                time.sleep(0.01)
            elif self.ledger.delivered("lmstfy", job.job_id, job.body, job.remaining_tries):
                self.lmstfy.ack(NS, "q", job.job_id)
                self.ledger.acked(job.job_id)

    def pump(self) -> None:
        while not self.stop.is_set():  # lmstfy's own ticks once a second: more often only races harder
            self.lmstfy.pump(int(time.time()))
            time.sleep(0.05)


@dataclass
class LmstfyPySide:
    """lmstfy-py's clients: publishers and workers over HTTP."""

    api: str
    token: str
    ledger: Ledger
    stop: threading.Event

    def publish(self, count: int) -> None:
        with httpx.Client(timeout=10) as http:
            for i in range(count):
                body = b"lmstfy-py %d" % i
                query = {"token": self.token, "tries": ROLLING_TRIES, "delay": int(i % 3 == 0)}
                answer = http.put(self.api, params=query, content=body)
                assert answer.status_code == 201, answer.text
                self.ledger.add(answer.json()["job_id"], body)

    def work(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self.stop.is_set():
                answer = http.get(self.api, params={"token": self.token, "ttr": ROLLING_TTR_S, "timeout": 1})
                if answer.status_code == 404:
                    continue
                assert answer.status_code == 200, answer.text
                job = answer.json()
                if self.ledger.delivered(
                    "lmstfy-py", job["job_id"], base64.b64decode(job["data"]), job["remain_tries"]
                ):
                    acked = http.delete(f"{self.api}/job/{job['job_id']}", params={"token": self.token})
                    assert acked.status_code == 204, acked.text
                    self.ledger.acked(job["job_id"])


def test_lmstfy_and_lmstfy_py_working_on_one_redis_deliver_each_job_once(tmp_path: Path, redis_url: str) -> None:
    """A rolling switch: lmstfy (its publish, its non-atomic RPOP-then-ZADD consume, its ACK, its
    timer pump) keeps working on its layout while lmstfy-py (two workers) serves the same Redis,
    both publishing to and consuming one queue. Some deliveries are abandoned on either side, so both
    timer pumps race for the reservations that end. Every job is ACKed once; each is delivered once,
    or twice if its first delivery was abandoned; bodies and tries intact."""
    client = redis.Redis.from_url(redis_url)
    ledger, stop = Ledger(), threading.Event()
    lmstfy = LmstfySide(LmstfyPool(client), ledger, stop)
    lmstfy.publish(150, 0)  # what lmstfy holds when lmstfy-py starts
    with Server(tmp_path, redis_url=redis_url, args=["--workers", "2"]) as server, ThreadPoolExecutor(12) as threads:
        server.start()
        ours = LmstfyPySide(f"{server.data_url}/api/{NS}/q", create_token(server, NS), ledger, stop)
        workers = [threads.submit(work) for work in [lmstfy.work] * 3 + [ours.work] * 4 + [lmstfy.pump]]
        publishers = [threads.submit(lmstfy.publish, 250, 0.004), threads.submit(ours.publish, 150)]
        for done in publishers:
            done.result()
        all_acked = wait_until(lambda: ledger.all_acked() or any(w.done() for w in workers), 60)
        time.sleep(ROLLING_TTR_S + 1.5)  # a reservation that was not ended by its ACK would come back meanwhile
        stop.set()
        for worker in workers:
            worker.result()  # a worker's failed assertion fails the test
    client.close()
    assert all_acked, f"{len(ledger.published) - len(ledger.acks)} jobs never ACKed"
    assert ledger.wrong_deliveries() == []
    assert len(ledger.published) == 550
    assert [job_id for job_id, n in ledger.acks.items() if n != 1] == []
    expected = {job_id: 2 if job_id in ledger.abandoned else 1 for job_id in ledger.published}
    assert dict(ledger.deliveries) == expected
    assert ledger.abandoned and ledger.by_side["lmstfy"] > 50 and ledger.by_side["lmstfy-py"] > 200, ledger.by_side
