"""Fixtures of the suites that drive one real `lmstfy-py serve` per module (tests/client,
tests/worker): the server, and per test a namespace of its own with a token and a Client (no
retries: a failure shows at once). A conftest imports them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from lmstfy_py.client import Client
from tests.servers import Server, create_token

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])) as running:
        yield running.start()


@pytest.fixture
def namespace() -> str:
    return f"n{next(_names)}"


@pytest.fixture
def token(server: Server, namespace: str) -> str:
    return create_token(server, namespace)


@pytest.fixture
def client(server: Server, namespace: str, token: str) -> Iterator[Client]:
    with Client(server.data_url, namespace, token, retries=0) as made:
        yield made
