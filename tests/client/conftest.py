"""One real `lmstfy-py serve` (embedded Redis) for the module, and per test a namespace of its own
with a token and a Client (no retries unless a test asks: a failure shows at once)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest

from lmstfy_py.client import AsyncClient, Client
from tests.servers import Server, create_token

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("client")) as running:
        yield running.start()


@pytest.fixture
def namespace() -> str:
    return f"c{next(_names)}"


@pytest.fixture
def token(server: Server, namespace: str) -> str:
    return create_token(server, namespace)


@pytest.fixture
def client(server: Server, namespace: str, token: str) -> Iterator[Client]:
    with Client(server.data_url, namespace, token, retries=0) as made:
        yield made


@pytest.fixture
async def aclient(server: Server, namespace: str, token: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(server.data_url, namespace, token, retries=0) as made:
        yield made
