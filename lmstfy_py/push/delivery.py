"""One POST of a job to a push group's endpoint, as lmstfy makes it, signed when asked.

The body is lmstfy's (its job.MarshalText): {"namespace","queue","id","ttl","elapsed_ms","body"}
with the data in standard base64. Beyond lmstfy, every POST says the job id and the attempt in
headers, and a group with a secret signs it: `X-Lmstfy-Signature: t=<unix ms>,v1=<hex HMAC-SHA256
of "<t>.<body>" keyed by the secret>` (docs/API.md says how to check it).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time

import aiohttp

from lmstfy_py.types import Job

TIMEOUT = "timeout"
UNREACHABLE = "unreachable"


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
    if secret is not None:
        headers["X-Lmstfy-Signature"] = signature(secret, body, time.time_ns() // 1_000_000)
    return headers


async def post(session: aiohttp.ClientSession, endpoint: str, job: Job, secret: str | None, timeout_s: int) -> str:
    """POSTs the job; its outcome: the HTTP status as text, TIMEOUT or UNREACHABLE."""
    body = body_of(job)
    try:
        async with session.post(
            endpoint,
            data=body,
            headers=headers_of(job, body, secret),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            allow_redirects=False,
        ) as answer:
            await answer.read()  # the whole answer, so the connection can serve the next POST
            return str(answer.status)
    except TimeoutError:
        return TIMEOUT
    except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError):
        return UNREACHABLE
