"""Workers over lmstfy_py.client: `Worker(handler, ...).run()`, or `lmstfy-py worker MODULE:CALLABLE`.

    from lmstfy_py.worker import Worker

    def handle(job):
        print(job.id, job.data)

    Worker(handle, url="http://127.0.0.1:7777", token=TOKEN, namespace="demo", queues="orders").run()

A handler that returns ACKs its job; `raise Bury("why")` buries it; any other exception releases
it with its backoff. docs/CLIENT.md says everything else (concurrency, leases, the stop).

The names are loaded on first use (PEP 562), so that `lmstfy-py` can register the `worker`
command (worker/command.py) without importing the client and httpcore for every other command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmstfy_py.client import Bury, Job
    from lmstfy_py.worker.runner import Worker

__all__ = ["Bury", "Job", "Worker"]
_HOMES = {"Bury": "lmstfy_py.client", "Job": "lmstfy_py.client", "Worker": "lmstfy_py.worker.runner"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
