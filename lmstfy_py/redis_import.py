"""redis-py, imported before anything else of the server, without OpenTelemetry.

redis-py 8 imports OpenTelemetry's metrics API and SDK whenever they are installed, for its opt-in
command metrics (which this server does not use: store/counted.py counts commands itself). With the
[otel] extra installed, every server process then imported some 60 OpenTelemetry modules and spent
100-250 ms more starting, where SPEC 15 says a server without --otlp-endpoint imports nothing of
OpenTelemetry. The server (server.py, and `serve` in cli.py) imports this module first: redis-py finds no
OpenTelemetry and keeps its metrics off, and tracing/ still imports OpenTelemetry as usual when an
endpoint is set. A process that imported either already (an application embedding us) is left as is.
"""

from __future__ import annotations

import importlib
import sys

BLOCKED = "opentelemetry"
MODULES = ("redis", "redis.asyncio", "redis.asyncio.cluster", "redis.asyncio.sentinel")


def import_redis() -> None:
    if "redis" in sys.modules or BLOCKED in sys.modules:
        return
    sys.modules[BLOCKED] = None  # type: ignore[assignment]  # None: importing it raises ImportError
    try:
        for name in MODULES:
            importlib.import_module(name)
    finally:
        del sys.modules[BLOCKED]


import_redis()
