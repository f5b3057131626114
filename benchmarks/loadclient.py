"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for the benchmark scripts.

One `Connection` is one TCP connection used by one task at a time, so a load generator
with N tasks holds exactly N connections and measures the server, not a client library's
pool (httpx's serialized our 32 long-polling consumers down to one request in flight).
It speaks just what lmstfy-py answers: a status line, headers, a Content-Length body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        target = f"{path}?{urlencode(params)}" if params else path
        more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\n{more}Content-Length: {len(body)}\r\n\r\n"
        self._writer.write(head.encode() + body)
        try:
            answer, keep_alive = await self._read_answer()
            if not keep_alive:  # e.g. hypercorn's keep_alive_max_requests: the next request reconnects
                await self.close()
            return answer
        except (OSError, asyncio.IncompleteReadError, ValueError):
            await self.close()
            raise ConnectionError(f"{method} {path}: connection lost") from None

    async def _read_answer(self) -> tuple[Answer, bool]:
        assert self._reader is not None
        status_line = await self._reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length, keep_alive = 0, True
        while (line := await self._reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                keep_alive = False
        body = await self._reader.readexactly(length) if length else b""
        return Answer(status, body), keep_alive

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._reader = None
