"""What both clients send: the server's address, each call's URL, headers and timeouts (as
httpcore's arguments for Client and event streams, as bytes on a connection for AsyncClient's
requests, http11.py), and the answer as the readers see it.

httpcore is httpx's own transport: pooled keep-alive connections, connect/read/write/pool
timeouts, TLS. httpx's layer above it (URL objects, cookies, redirects, auth, hooks) is nothing
this client uses and cost ~40% of each request's CPU (docs/CLIENT.md, "How the clients send").
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpcore

from lmstfy_py import __version__
from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.http11 import Timeouts

# Idle connections are dropped before lmstfy-py's 5 s keep-alive timeout: a request sent on a
# connection the server is closing fails, and a publish without job_id is not sent again.
KEEPALIVE_EXPIRY_S = 4.0
MAX_CONNECTIONS = 100
USER_AGENT = f"lmstfy-py-client/{__version__}".encode()
# Job ids (ours and business ones) are made of these and A-Z a-z 0-9 - _ .: left as they are,
# a batch ACK's hundred ids are encoded without a character-by-character pass.
QUERY_SAFE = ",:"
BODY_METHODS = ("PUT", "POST", "PATCH")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The server as `http[s]://host[:port][/prefix]`, and how to reach it."""

    scheme: bytes
    host: bytes
    port: int | None
    prefix: str  # a path the server is mounted under behind a proxy, "" usually
    headers: tuple[tuple[bytes, bytes], ...]
    timeout: float
    head: bytes  # Host and `headers` as written on a connection (http11.py): made once, not per request

    @classmethod
    def of(cls, url: str, token: str, timeout: float) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, not {url!r}")
        # The token goes in a header, never in the URL, where access logs would keep it.
        headers = ((b"X-Token", token.encode()), (b"User-Agent", USER_AGENT))
        host = parts.hostname.encode("idna")
        bracketed = b"[" + host + b"]" if b":" in host else host  # an IPv6 address
        lines = [b"Host: " + bracketed + (b"" if parts.port is None else b":%d" % parts.port)]
        head = b"".join(line + b"\r\n" for line in [*lines, *(name + b": " + value for name, value in headers)])
        return cls(parts.scheme.encode(), host, parts.port, parts.path.rstrip("/"), headers, timeout, head)

    def target(self, call: Call[Any]) -> str:
        """The request target: the path under the prefix, and the query."""
        target = self.prefix + call.path
        if call.params:
            target += "?" + urlencode(call.params, safe=QUERY_SAFE)
        return target

    def url(self, call: Call[Any]) -> httpcore.URL:
        return httpcore.URL(scheme=self.scheme, host=self.host, port=self.port, target=self.target(call).encode())

    def request(self, call: Call[Any]) -> dict[str, Any]:
        """The arguments of httpcore's `request` (blocking or awaited) for `call`."""
        return {
            "method": call.method,
            "url": self.url(call),
            "headers": self.request_headers(call),
            "content": call.body,
            "extensions": self.extensions(call),
        }

    def request_bytes(self, call: Call[Any]) -> bytes:
        """`call` as it is written on an HTTP/1.1 connection (http11.py), with what httpcore adds:
        Host, and Content-Length for a body (0 for a PUT or POST without one)."""
        body = call.body or b""
        request = [f"{call.method} {self.target(call)} HTTP/1.1\r\n".encode(), self.head]
        request += [k.encode() + b": " + v.encode() + b"\r\n" for k, v in call.headers.items()]
        if call.body is not None or call.method in BODY_METHODS:
            request.append(b"Content-Length: %d\r\n" % len(body))
        return b"".join(request) + b"\r\n" + body

    def timeouts(self, call: Call[Any]) -> Timeouts:
        t = self.timeout
        return Timeouts(connect=t, read=t + call.wait_s, write=t, pool=t)

    def request_headers(self, call: Call[Any]) -> list[tuple[bytes, bytes]]:
        return [*self.headers, *((k.encode(), v.encode()) for k, v in call.headers.items())]

    def extensions(self, call: Call[Any]) -> dict[str, Any]:
        """A long-poll may hold its answer `wait_s` seconds: its read timeout is that much longer."""
        t = self.timeout
        return {"timeout": {"connect": t, "read": t + call.wait_s, "write": t, "pool": t}}


def pool_options(ssl_context: ssl.SSLContext | None) -> dict[str, Any]:
    """The keyword arguments of httpcore.ConnectionPool and AsyncConnectionPool alike."""
    return {
        "ssl_context": ssl_context,
        "max_connections": MAX_CONNECTIONS,
        "max_keepalive_connections": MAX_CONNECTIONS,
        "keepalive_expiry": KEEPALIVE_EXPIRY_S,
    }


def answer_of(response: httpcore.Response) -> Answer:
    request_id = next((value.decode() for name, value in response.headers if name.lower() == b"x-request-id"), None)
    return Answer(response.status, response.content, request_id)
