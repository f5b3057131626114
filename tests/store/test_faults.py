"""What counts as a storage outage (503, a background loop's quiet retry): Redis's failures only.

An OSError from a file (a time zone, a full metrics disk) used to read as "cannot connect to redis";
and redis-py's own AttributeError of a connection closed under a command (a Cluster failover,
tests/e2e/test_cluster_failover.py) as a bug, a 500.
"""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError

from lmstfy_py.store.faults import call_failure, outage_reason


@pytest.mark.parametrize(
    "error", [FileNotFoundError(2, "no such file"), PermissionError(13, "denied"), OSError(28, "no space left")]
)
def test_an_oserror_from_outside_redis_is_no_outage(error: OSError) -> None:
    assert outage_reason(error) is None


@pytest.mark.parametrize("error", [ConnectionRefusedError(111, "refused"), ConnectionResetError(104, "reset")])
def test_a_sockets_failure_is_an_outage(error: OSError) -> None:
    assert outage_reason(error) == "cannot connect to redis"


async def test_redis_pys_error_of_a_closed_connection_is_an_outage() -> None:
    closed = Connection(host="127.0.0.1", port=1)  # never connected: no writer, as after a disconnect mid-command
    with pytest.raises(AttributeError) as raised:
        await closed._send_packed_command([b"PING"])
    failure = call_failure(raised.value)
    assert isinstance(failure, RedisConnectionError)
    assert outage_reason(failure) == "cannot connect to redis"


def test_our_own_attribute_error_stays_a_bug() -> None:
    with pytest.raises(AttributeError) as raised:
        None.writelines([])  # type: ignore[attr-defined]
    assert call_failure(raised.value) is None
