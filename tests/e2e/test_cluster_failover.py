"""A Redis Cluster master dies (SIGKILL) while clients publish, consume and ACK through a real
`lmstfy-py serve`: its replica takes over and the server follows by itself.

The promise (docs/API.md, "When Redis fails"): for the failover's duration requests answer 503
(which clients retry), never 500; the log has no traceback, only the health check's line when the
pool fails and when it answers again; once the replica serves the slot, the server serves it
again without a restart. redis-py used to let failover-time errors out as AttributeError
("'NoneType' object has no attribute 'writelines'") or RuntimeError ("TCPTransport closed"):
500s in 7 of 12 kills. So this kills several masters in turn under load, each time one of the
masters of a loaded namespace, the killed node rejoining as its replica before the next kill.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token
from benchmarks.harness.redis_groups import ReplicatedCluster

KILLS = 4
CLIENTS_PER_NS = 4
SERVES_AGAIN_WITHIN_S = 10.0  # a failover takes about 2.5 s with cluster-node-timeout 1000 ms
QUEUE = "q"
READY_TIMEOUT_S = 30.0  # a start takes 2-4 s; once over 15 s on the shared 2-core test machine


@dataclass(frozen=True)
class Answer:
    what: str
    status: int
    body: str


@pytest.fixture
def namespaces(replicated_cluster: ReplicatedCluster) -> tuple[str, str]:
    """Two namespaces whose keys live on different masters."""
    first, *others = (f"failover{i}" for i in range(100))
    first_master = replicated_cluster.master_of(replicated_cluster.slot_of(f"{{{first}}}"))
    second = next(
        ns for ns in others if replicated_cluster.master_of(replicated_cluster.slot_of(f"{{{ns}}}")) is not first_master
    )
    return first, second


@pytest.fixture
def server(tmp_path: Path, replicated_cluster: ReplicatedCluster, http_server: str) -> Iterator[Server]:
    config = tmp_path / "lmstfy.toml"
    nodes = ", ".join(f'"{address}"' for address in replicated_cluster.addresses)
    config.write_text(f'[pools.default]\nkind = "cluster"\ncluster_nodes = [{nodes}]\n')
    # One worker: every client's requests share one process's RedisCluster client, as in the issue.
    with Server(tmp_path, config=config, args=["--workers", "1"], http_server=http_server) as started:
        started.launch()
        started.wait_ready(READY_TIMEOUT_S)
        yield started


async def load(base_url: str, ns: str, token: str, stop: asyncio.Event, answers: list[Answer]) -> None:
    """Publish, consume, ACK, again and again until `stop`."""
    params = {"token": token}
    async with httpx.AsyncClient(base_url=base_url, params=params, timeout=30) as client:

        async def call(what: str, method: str, path: str, **kwargs: object) -> httpx.Response:
            response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
            answers.append(Answer(what, response.status_code, response.text))
            return response

        while not stop.is_set():
            await call("publish", "PUT", f"/api/{ns}/{QUEUE}", content=b"job")
            consumed = await call("consume", "GET", f"/api/{ns}/{QUEUE}", params={**params, "ttr": 30})
            if consumed.status_code == 200:
                await call("ack", "DELETE", f"/api/{ns}/{QUEUE}/job/{consumed.json()['job_id']}")


async def first_publish(base_url: str, ns: str, token: str, since: float) -> float:
    """Seconds from `since` until a publish to `ns` answers 201."""
    async with httpx.AsyncClient(base_url=base_url, params={"token": token}, timeout=30) as client:
        while (await client.put(f"/api/{ns}/{QUEUE}", content=b"probe")).status_code != 201:
            assert time.monotonic() - since < SERVES_AGAIN_WITHIN_S, f"{ns} not served again"
            await asyncio.sleep(0.05)
    return time.monotonic() - since


def unexpected(answer: Answer) -> bool:
    if answer.status in (200, 201, 204):
        return False
    if answer.status == 404:  # the consume of an empty queue
        return not (answer.what == "consume" and '"no job available"' in answer.body)
    return answer.status != 503 or '"storage unavailable: ' not in answer.body


async def test_requests_answer_503_never_500_while_cluster_masters_fail_over(
    replicated_cluster: ReplicatedCluster, server: Server, namespaces: tuple[str, str]
) -> None:
    tokens = {ns: create_token(server, ns) for ns in namespaces}
    answers: list[Answer] = []
    stop = asyncio.Event()
    clients = [
        asyncio.create_task(load(server.data_url, ns, tokens[ns], stop, answers))
        for ns in namespaces
        for _ in range(CLIENTS_PER_NS)
    ]
    outages: list[float] = []
    try:
        for kill in range(KILLS):
            ns = namespaces[kill % len(namespaces)]
            await asyncio.to_thread(replicated_cluster.replicated)  # its tokens and jobs are on the replica too
            await asyncio.sleep(0.5)  # under load
            killed_at = time.monotonic()
            dead = await asyncio.to_thread(replicated_cluster.crash_master_of, replicated_cluster.slot_of(f"{{{ns}}}"))
            outages.append(await first_publish(server.data_url, ns, tokens[ns], killed_at))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(replicated_cluster.revive, dead)
    finally:
        stop.set()
        await asyncio.gather(*clients)

    assert len(answers) > 100 * KILLS  # the clients kept the server busy throughout
    bad = [answer for answer in answers if unexpected(answer)]
    assert not bad, bad[:10]
    assert "Traceback" not in server.stderr()
    assert "internal error" not in server.stderr()
    # Served again by itself (publish 201) within SERVES_AGAIN_WITHIN_S of each kill: first_publish asserts it.
    print(f"failovers: {', '.join(f'{s:.1f} s' for s in outages)}; {sum(a.status == 503 for a in answers)} 503s")
