"""One real `lmstfy-py serve` (embedded Redis) for the module, and per test a namespace of its own
with a token, a Client and an AsyncClient (tests/fixtures/module_server.py; no retries unless a test asks)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import AsyncClient
from tests.fixtures.module_server import client, lmstfy_server, namespace, token

__all__ = ["aclient", "client", "lmstfy_server", "namespace", "token"]


@pytest.fixture
async def aclient(lmstfy_server: Server, namespace: str, token: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(lmstfy_server.data_url, namespace, token, retries=0) as made:
        yield made
