#!/usr/bin/env python3
"""A worker for the jobs of examples/publish.py. Either through the command:

    LMSTFY_TOKEN=... lmstfy-py worker examples.worker:close_order --namespace demo --queue orders

or as a program (LMSTFY_URL, LMSTFY_TOKEN, LMSTFY_NAMESPACE as for publish.py):

    LMSTFY_TOKEN=... python examples/worker.py    # a Python with lmstfy-py installed: .venv/bin/python

Stop it with Ctrl-C or SIGTERM: running handlers get their grace period, the rest go back to
the queue for another worker.
"""

from __future__ import annotations

import asyncio
import logging
import os

from lmstfy_py.client import Bury, Job
from lmstfy_py.worker import Worker


async def close_order(job: Job) -> None:
    """Returning None ACKs the job (a value would complete it with that result, for `result` to read);
    Bury sends it to the dead letter; any other exception retries it."""
    order = job.json()
    if "order" not in order:
        raise Bury("not an order")  # trying again would not help
    await asyncio.sleep(0.01)  # the real work: a database update, an HTTP call...
    print(f"closed order {order['order']} (job {job.id}, {job.remain_tries} tries left)", flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Worker(
        close_order,
        url=os.environ.get("LMSTFY_URL", "http://127.0.0.1:7777"),
        token=os.environ["LMSTFY_TOKEN"],
        namespace=os.environ.get("LMSTFY_NAMESPACE", "demo"),
        queues="orders",
        concurrency=16,
    ).run()
