"""SPEC 13 Stream on a real `lmstfy-py serve`, under each HTTP server: the head at once, frames in order,
replay from 0 or a cursor (Last-Event-ID winning), gaps, the merged stream, the admin twin, heartbeats,
SIGTERM ending streams at once, and the client resuming over a real restart."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server, create_token
from lmstfy_py.client import Client, EventGap, QueueEvent, StreamItem
from tests.conftest import EVERY_HTTP_SERVER, make_lmstfy_server

__all__ = ["make_lmstfy_server"]

HTTP_SERVERS = EVERY_HTTP_SERVER
NS = "evs"
READ_S = 5.0  # a frame expected later than this is missing (the heartbeat is 15 s unless configured)

Frame = dict[str, Any]


@contextmanager
def stream(url: str, path: str, headers: dict[str, str] | None = None, **query: Any) -> Iterator[Iterator[Frame]]:
    """An open event stream: its frames as dicts (`id`, `event`, `data` parsed; a comment as `comment`)."""
    with (
        httpx.Client(timeout=httpx.Timeout(10, read=READ_S)) as client,
        client.stream("GET", url + path, params=query, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield frames(response.iter_lines())


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    frame: Frame = {}
    for line in lines:
        if not line:
            if frame:
                yield frame
            frame = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            name, _, value = line.partition(": ")
            frame[name] = json.loads(value) if name == "data" else value


def take(found: Iterator[Frame], count: int) -> list[Frame]:
    return [next(found) for _ in range(count)]


class Queue:
    """The namespace's token and short calls on the data API."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.token = create_token(server, NS)
        self.client = httpx.Client(base_url=server.data_url, timeout=10, params={"token": self.token})

    def settings(self, queue: str, **values: int) -> None:
        response = self.client.put(f"/api/{NS}/{queue}/settings", params=values)
        assert response.status_code == 200, response.text

    def publish(self, queue: str = "q", **query: Any) -> str:
        response = self.client.put(f"/api/{NS}/{queue}", params=query, content=b"job")
        assert response.status_code == 201, response.text
        job_id: str = response.json()["job_id"]
        return job_id

    def consume(self, queue: str = "q") -> str:
        response = self.client.get(f"/api/{NS}/{queue}")
        assert response.status_code == 200, response.text
        job_id: str = response.json()["job_id"]
        return job_id

    def ack(self, job_id: str, queue: str = "q") -> None:
        assert self.client.delete(f"/api/{NS}/{queue}/job/{job_id}").status_code == 204

    def open(self, path: str = "/q/events", headers: dict[str, str] | None = None, **query: Any) -> Any:
        return stream(self.server.data_url, f"/api/{NS}{path}", headers, token=self.token, **query)


def kinds(found: list[Frame]) -> list[tuple[str, str]]:
    return [(frame["event"], frame["data"]["job_id"]) for frame in found]


Serving = Callable[..., Queue]


@pytest.fixture
def serving(make_lmstfy_server: Callable[[], Server]) -> Iterator[Serving]:
    """Starts a server (with these flags) whose queue q keeps its last 100 events; closes the API clients."""
    made: list[Queue] = []

    def serve(*more: str) -> Queue:
        queue = Queue(make_lmstfy_server().start(*more))
        made.append(queue)
        queue.settings("q", events=100)
        return queue

    yield serve
    for queue in made:
        queue.client.close()


def test_head_at_once_then_each_change_in_order(serving: Serving) -> None:
    api = serving()
    started = time.monotonic()
    with api.open() as found:
        assert time.monotonic() - started < 2  # the head came before any event
        job_id = api.publish(priority=3)
        assert api.consume() == job_id
        api.ack(job_id)
        got = take(found, 3)
    assert kinds(got) == [("published", job_id), ("reserved", job_id), ("completed", job_id)]
    assert got[0]["data"]["priority"] == 3 and got[0]["data"]["queue"] == "q"
    assert [frame["data"]["attempt"] for frame in got] == [0, 1, 1]
    assert all(frame["data"]["kind"] == frame["event"] for frame in got)
    assert len({frame["id"] for frame in got}) == 3


def test_replay_from_zero_from_a_cursor_and_last_event_id_wins(serving: Serving) -> None:
    api = serving()
    ids = [api.publish() for _ in range(3)]
    with api.open(after="0") as found:
        kept = take(found, 3)
    assert kinds(kept) == [("published", job_id) for job_id in ids]
    with api.open(after=kept[0]["id"]) as found:
        assert [frame["id"] for frame in take(found, 2)] == [kept[1]["id"], kept[2]["id"]]
    with api.open(headers={"Last-Event-ID": kept[1]["id"]}, after="0") as found:
        later = api.publish()  # live after the replay, nothing repeated
        assert kinds(take(found, 2)) == [("published", ids[2]), ("published", later)]


def test_a_trimmed_cursor_gets_a_gap_first(serving: Serving) -> None:
    api = serving()
    api.settings("q", events=3)
    first = api.publish()
    with api.open(after="0") as found:
        cursor = take(found, 1)[0]["id"]
    ids = [api.publish() for _ in range(4)]  # five events, three kept: two after the cursor are lost
    with api.open(after=cursor) as found:
        gap, *rest = take(found, 4)
    assert gap == {"event": "gap", "data": {"kind": "gap", "queue": "q", "lost": 1}}
    assert kinds(rest) == [("published", job_id) for job_id in ids[1:]]
    assert first not in {frame["data"]["job_id"] for frame in rest}


def test_merged_stream_and_the_queue_named_events(serving: Serving) -> None:
    api = serving()
    api.settings("r", events=100)
    with api.open("/events", queues="q,r") as found:
        a, b = api.publish("q"), api.publish("r")
        got = take(found, 2)
    assert kinds(got) == [("published", a), ("published", b)]
    assert [frame["data"]["queue"] for frame in got] == ["q", "r"]
    c = api.publish("q")
    with api.open("/events", queues="q,r", after=got[0]["id"]) as found:  # a cursor over both queues
        assert sorted(kinds(take(found, 2))) == sorted([("published", b), ("published", c)])
    # Without `queues` the URL is still the consume of a queue named "events" (the lean dispatcher's).
    job_id = api.publish("events")
    assert api.consume("events") == job_id


def test_admin_twin_streams_without_a_tenant_token(serving: Serving) -> None:
    api = serving()
    with stream(api.server.admin_url, f"/queues/{NS}/q/events", pool="default") as found:
        job_id = api.publish()
        assert kinds(take(found, 1)) == [("published", job_id)]


def test_an_idle_stream_gets_a_comment_every_events_heartbeat(serving: Serving, tmp_path: Path) -> None:
    config = tmp_path / "heartbeat.toml"
    config.write_text("[server]\nevents_heartbeat = 1\n")
    api = serving("--config", str(config))
    with api.open() as found:
        started = time.monotonic()
        assert take(found, 2) == [{"comment": "idle"}] * 2
        assert 1.5 < time.monotonic() - started < 4


def test_sigterm_ends_streams_at_once(serving: Serving) -> None:
    api = serving()
    ended: list[float] = []

    def read_to_the_end() -> None:
        with api.open() as found:
            for _ in found:
                pass
        ended.append(time.monotonic())

    readers = [threading.Thread(target=read_to_the_end) for _ in range(3)]
    for reader in readers:
        reader.start()
    time.sleep(0.5)
    started = time.monotonic()
    api.server.signal(signal.SIGTERM)
    for reader in readers:
        reader.join(10)
    assert len(ended) == 3 and max(ended) - started < 2  # not the graceful timeout, nor the 15 s heartbeat
    assert api.server.wait(10) == 0


def test_the_client_resumes_over_a_restart_with_no_event_lost_or_repeated(
    serving: Serving, make_lmstfy_server: Callable[[], Server]
) -> None:
    api = serving()
    seen: list[StreamItem] = []
    client = Client(api.server.data_url, NS, api.token, retries=60, max_backoff=0.5)

    def follow() -> None:
        for item in client.events("q", after="0"):
            seen.append(item)
            if len(seen) == 6:
                return

    before = [api.publish() for _ in range(3)]
    follower = threading.Thread(target=follow)
    follower.start()
    wait_until(lambda: len(seen) == 3)
    api.server.stop()
    again = make_lmstfy_server().start()
    assert again.data_url == api.server.data_url  # the same server, restarted
    after = [api.publish() for _ in range(3)]
    follower.join(20)
    client.close()
    assert all(isinstance(item, QueueEvent) for item in seen)
    assert [(item.kind, item.job_id) for item in seen if not isinstance(item, EventGap)] == [
        ("published", job_id) for job_id in before + after
    ]


def wait_until(check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
