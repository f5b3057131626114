"""An endpoint's answer is read only as far as a few KiB: an endpoint answering 200 with hundreds of
MiB (no Content-Length, the body ends when the connection does) costs the server no memory, the job
is ACKed at once and the rest of the body is never read (its connection is closed)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from benchmarks.harness.lmstfy_servers import Server, free_port, wait_until
from tests.fixtures.push_endpoints import served_in_thread
from tests.push.helpers import NS, create_pusher, create_token, job_state, publish, served

MIB = 1 << 20
HUGE = 300 * MIB  # what the endpoint would send: before the fix the server held it (twice) in memory
MEMORY_BOUND = 40 * MIB  # what a server process's peak RSS may grow by
SENT_BOUND = 64 * MIB  # socket buffers hold a few MiB: the rest is never sent once the server closes


class HugeAnswers:
    """A raw HTTP endpoint on a free loopback port: each POST answered 200 with HUGE bytes streamed
    until the client closes the connection (no Content-Length, no chunking: the body is the rest of
    the connection). It notes the job ids it got and how much it sent on each connection."""

    def __init__(self) -> None:
        self.port = free_port()
        self.job_ids: list[str] = []
        self.sent: list[int] = []  # per connection, once it ended
        self._server: asyncio.Server | None = None

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sent = 0
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            body = await reader.readexactly(int(length[1]) if length else 0)
            self.job_ids.append(json.loads(body)["id"])
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
            chunk = b"x" * MIB
            while sent < HUGE:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the server closed it: what this endpoint should see
        finally:
            self.sent.append(sent)
            writer.close()

    async def start(self) -> HugeAnswers:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes: a body held even for a moment shows."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert found, status
    return int(found[1]) * 1024


def test_a_huge_answer_is_not_read_and_the_job_is_acked(tmp_path: Path, http_server: str) -> None:
    huge = HugeAnswers()
    with served(tmp_path, http_server) as server, served_in_thread(huge.start, huge.stop) as endpoint:
        token = create_token(server, NS)
        create_pusher(server, "huge", endpoint.url(), "q", timeout=30)
        before = {pid: peak_rss(pid) for pid in server.pids()}
        started = time.monotonic()
        job_ids = [publish(server, token, "q", b"first"), publish(server, token, "q", b"second")]

        acked = wait_until(lambda: _all_acked(server, token, job_ids), 20)
        took = time.monotonic() - started
        closed = wait_until(lambda: len(endpoint.sent) == 2, 10)
        grown = {pid: peak_rss(pid) - peak for pid, peak in before.items()}

    assert max(grown.values()) < MEMORY_BOUND, f"peak RSS grew by {grown} bytes"
    assert acked and took < 5, f"ACKed: {acked}, after {took:.1f} s"
    assert sorted(endpoint.job_ids) == sorted(job_ids)  # each POSTed once: a 200 ACKs it
    assert closed and max(endpoint.sent) < SENT_BOUND, f"the endpoint sent {endpoint.sent} bytes: read on"


def _all_acked(server: Server, token: str, job_ids: list[str]) -> bool:
    return all(job_state(server, token, "q", job_id).status_code == 404 for job_id in job_ids)
