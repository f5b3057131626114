#!/usr/bin/env python3
"""Publish a few jobs from an application: `python examples/publish.py [COUNT]`.

Reads LMSTFY_URL (default http://127.0.0.1:7777), LMSTFY_TOKEN and LMSTFY_NAMESPACE (default
demo), and publishes COUNT (default 10) order-closing jobs to queue `orders`, each with a
business id (so that running it twice publishes nothing new) and three tries with an
exponential backoff. Create a token first: `lmstfy-py token create demo --description demo`.
Run it with a Python that has lmstfy-py installed (in a checkout: .venv/bin/python).
"""

from __future__ import annotations

import json
import os
import sys

from lmstfy_py.client import Client


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    url = os.environ.get("LMSTFY_URL", "http://127.0.0.1:7777")
    namespace = os.environ.get("LMSTFY_NAMESPACE", "demo")
    with Client(url, namespace, os.environ["LMSTFY_TOKEN"]) as client:
        for order in range(1, count + 1):
            body = json.dumps({"order": order, "action": "close"})
            job_id = client.publish(
                "orders", body, job_id=f"close-order-{order}", tries=3, backoff="exponential", backoff_ms=500
            )
            print(f"published {job_id}")
        print(f"orders: {client.size('orders')} ready")


if __name__ == "__main__":
    main()
