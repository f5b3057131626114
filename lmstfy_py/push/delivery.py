"""One POST of a job to a push group's endpoint, as lmstfy makes it, signed when asked.

The body is lmstfy's (its job.MarshalText): {"namespace","queue","id","ttl","elapsed_ms","body"}
with the data in standard base64. Beyond lmstfy, every POST says the job id and the attempt in
headers, and its W3C trace context when it has one (SPEC 15); a group with a secret signs it:
`X-Lmstfy-Signature: t=<unix ms>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the secret>`
(docs/API.md says how to check it).

Only the status of an answer counts: at most MAX_ANSWER_BYTES of its body are read, and a longer
one's connection is closed rather than read to its end (an endpoint answering with hundreds of MiB
would otherwise be held in memory whole). With `[push] allowed_networks`, every connect is checked
against them on the address it is about to reach, after any DNS look-up (sockets()).
"""

from __future__ import annotations

import asyncio
import base64
import errno
import hashlib
import hmac
import ipaddress
import json
import socket
import time
from collections.abc import Sequence

import aiohttp

from lmstfy_py.config import IpNetwork
from lmstfy_py.types import Job

TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
NOT_ALLOWED = "not_allowed"  # the connect was refused by [push] allowed_networks
MAX_ANSWER_BYTES = 4096  # of an answer's body: enough for an error text, and a short one's connection is kept


class AddressNotAllowed(OSError):
    """A connect to an address outside [push] allowed_networks: refused before it is made."""

    MESSAGE = "address not allowed by [push] allowed_networks"

    def __init__(self) -> None:
        super().__init__(errno.EACCES, self.MESSAGE)


def is_allowed(host: str, networks: Sequence[IpNetwork]) -> bool:
    """Whether a connect to `host` (the address of a socket address) may be made."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # no canonical address (2130706433, 0x7f.1, a name): connecting would resolve it again
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
    return any(address in network for network in networks)


def sockets(networks: Sequence[IpNetwork]) -> aiohttp.SocketFactoryType:
    """aiohttp's socket_factory: called with the very address each connect goes to, after DNS and
    for IP literals alike (aiohttp's resolver never sees those), so neither a name resolving to a
    closed address nor a literal gets past it."""

    def new_socket(addr_info: aiohttp.AddrInfoType) -> socket.socket:
        family, kind, proto, _, address = addr_info
        if not is_allowed(str(address[0]), networks):
            raise AddressNotAllowed()
        return socket.socket(family, kind, proto)

    return new_socket


def body_of(job: Job) -> bytes:
    return json.dumps(
        {
            "namespace": job.namespace,
            "queue": job.queue,
            "id": job.job_id,
            "ttl": job.ttl,
            "elapsed_ms": job.elapsed_ms,
            "body": base64.b64encode(job.body).decode("ascii"),
        }
    ).encode()


def signature(secret: str, body: bytes, now_ms: int) -> str:
    digest = hmac.new(secret.encode(), f"{now_ms}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={now_ms},v1={digest}"


def headers_of(job: Job, body: bytes, secret: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "X-Lmstfy-Job-Id": job.job_id,
        "X-Lmstfy-Attempt": str(job.attempts),
    }
    if job.trace is not None:  # SPEC 15; the signature covers the body only, so it stays valid
        headers["traceparent"] = job.trace.traceparent
        if job.trace.tracestate is not None:
            headers["tracestate"] = job.trace.tracestate
    if secret is not None:
        headers["X-Lmstfy-Signature"] = signature(secret, body, time.time_ns() // 1_000_000)
    return headers


async def post(session: aiohttp.ClientSession, endpoint: str, job: Job, secret: str | None, timeout_s: int) -> str:
    """POSTs the job; its outcome: the HTTP status as text, TIMEOUT, UNREACHABLE or NOT_ALLOWED."""
    body = body_of(job)
    try:
        async with session.post(
            endpoint,
            data=body,
            headers=headers_of(job, body, secret),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            allow_redirects=False,
        ) as answer:
            await _read_some(answer)
            return str(answer.status)
    except TimeoutError:
        return TIMEOUT
    except aiohttp.ClientConnectorError as exc:
        return NOT_ALLOWED if _not_allowed(exc.os_error) else UNREACHABLE
    except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError, ValueError):
        return UNREACHABLE


async def _read_some(answer: aiohttp.ClientResponse) -> None:
    """Reads at most MAX_ANSWER_BYTES of the body: a body read to its end leaves the connection to
    the next POST; a longer one (or one cut, or too slow) has its connection closed, unread. The
    status alone is the outcome, as lmstfy's (which never reads the body)."""
    got = 0
    try:
        while got <= MAX_ANSWER_BYTES and not answer.content.at_eof():
            chunk = await answer.content.read(MAX_ANSWER_BYTES + 1 - got)
            if not chunk:
                break
            got += len(chunk)
    except (TimeoutError, aiohttp.ClientError, OSError, asyncio.IncompleteReadError):
        answer.close()
        return
    if got > MAX_ANSWER_BYTES or not answer.content.at_eof():
        answer.close()  # never back to the pool: the rest of the body would be read as the next answer


def _not_allowed(error: OSError) -> bool:
    # With several addresses, aiohappyeyeballs raises one OSError carrying all their texts.
    return isinstance(error, AddressNotAllowed) or AddressNotAllowed.MESSAGE in str(error)
