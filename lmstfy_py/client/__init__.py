"""The Python client of lmstfy-py (and of Go lmstfy, for the routes it has): `Client` (blocking) and
`AsyncClient` (asyncio) for every data-plane route, the `Job` value, and typed exceptions.

    from lmstfy_py.client import Client

    with Client("http://127.0.0.1:7777", "demo", token) as client:
        client.publish("orders", b"close order 42", delay=30, tries=3)
        job = client.consume("orders", ttr=30, timeout=5)
        if job is not None:
            client.ack(job.queue, job.id)

docs/CLIENT.md documents every method; lmstfy_py.worker runs handlers over it.
"""

from lmstfy_py.client.aio import AsyncClient
from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.errors import (
    BadRequest,
    Bury,
    Conflict,
    LmstfyError,
    NotFound,
    PayloadTooLarge,
    ServerError,
    Throttled,
    Unauthorized,
    Unavailable,
)
from lmstfy_py.client.events import EventGap, QueueEvent, StreamItem
from lmstfy_py.client.job import (
    DeadJob,
    DeadLetter,
    DeadPage,
    DueBuckets,
    Job,
    QueueStats,
    Released,
    Schedule,
    Scheduled,
)
from lmstfy_py.client.outcomes import Outcome, Settings, SettingsArgs
from lmstfy_py.client.retry import RetryPolicy
from lmstfy_py.client.routes import Backoff, Catchup, PublishArgs, ScheduleArgs
from lmstfy_py.client.sync import Client

__all__ = [
    "Answer",
    "AsyncClient",
    "Backoff",
    "BadRequest",
    "Bury",
    "Call",
    "Catchup",
    "Client",
    "Conflict",
    "DeadJob",
    "DeadLetter",
    "DeadPage",
    "DueBuckets",
    "EventGap",
    "Job",
    "LmstfyError",
    "NotFound",
    "Outcome",
    "PayloadTooLarge",
    "PublishArgs",
    "QueueEvent",
    "QueueStats",
    "Released",
    "RetryPolicy",
    "Schedule",
    "ScheduleArgs",
    "Scheduled",
    "ServerError",
    "Settings",
    "SettingsArgs",
    "StreamItem",
    "Throttled",
    "Unauthorized",
    "Unavailable",
]
