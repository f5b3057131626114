"""Every route's failures as the client's exceptions, each carrying the server's own message, its
status and the answer's request id: 401, 404, 409, 400, 413, 429 from a real server (503 and
unreachable servers: test_retries.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server
from lmstfy_py.client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    LmstfyError,
    NotFound,
    PayloadTooLarge,
    Throttled,
    Unauthorized,
)

UNKNOWN_ID = "01M80JAJJVYF6PEPP4G0F00000"

# One call of every method that sends a token, by method name.
WITH_TOKEN: dict[str, Callable[[Client], object]] = {
    "publish": lambda c: c.publish("q", b"x"),
    "publish_many": lambda c: c.publish_many("q", [1]),
    "republish": lambda c: c.republish("q", UNKNOWN_ID, b"x"),
    "consume": lambda c: c.consume("q"),
    "consume_many": lambda c: c.consume_many(["q", "r"], 5),
    "ack": lambda c: c.ack("q", UNKNOWN_ID),
    "ack_many": lambda c: c.ack_many("q", [UNKNOWN_ID]),
    "release": lambda c: c.release("q", UNKNOWN_ID),
    "touch": lambda c: c.touch("q", UNKNOWN_ID),
    "bury": lambda c: c.bury("q", UNKNOWN_ID),
    "peek": lambda c: c.peek("q"),
    "peek_job": lambda c: c.peek_job("q", UNKNOWN_ID),
    "stats": lambda c: c.stats("q"),
    "destroy": lambda c: c.destroy("q"),
    "pause": lambda c: c.pause("q"),
    "resume": lambda c: c.resume("q"),
    "dead_letter": lambda c: c.dead_letter("q"),
    "respawn": lambda c: c.respawn("q"),
    "delete_dead": lambda c: c.delete_dead("q"),
    "dead_jobs": lambda c: c.dead_jobs("q"),
    "respawn_dead_job": lambda c: c.respawn_dead_job("q", UNKNOWN_ID),
    "delete_dead_job": lambda c: c.delete_dead_job("q", UNKNOWN_ID),
    "schedule": lambda c: c.schedule("q", "beat", b"x", every=60),
    "schedules": lambda c: c.schedules("q"),
    "get_schedule": lambda c: c.get_schedule("q", "beat"),
    "delete_schedule": lambda c: c.delete_schedule("q", "beat"),
    "complete": lambda c: c.complete("q", UNKNOWN_ID, result=b"r"),
    "result": lambda c: c.result("q", UNKNOWN_ID),
    "settings": lambda c: c.settings("q", keep=1),
    "promote": lambda c: c.promote("q", UNKNOWN_ID),
    "events": lambda c: next(c.events("q")),  # refused before any event: the stream's first step raises
}
# lmstfy's two public routes.
WITHOUT_TOKEN: dict[str, Callable[[Client], object]] = {
    "size": lambda c: c.size("q"),
    "dead_letter_size": lambda c: c.dead_letter_size("q"),
}


def test_the_tables_name_every_route_of_the_client() -> None:
    public = {name for name in vars(Client) if not name.startswith("_")} - {"close", "send"}
    assert public == set(WITH_TOKEN) | set(WITHOUT_TOKEN)


@pytest.mark.parametrize("route", sorted(WITH_TOKEN))
def test_a_token_of_another_namespace_is_unauthorized(lmstfy_server: Server, token: str, route: str) -> None:
    with Client(lmstfy_server.data_url, "elsewhere", token, retries=0) as other, pytest.raises(Unauthorized) as caught:
        WITH_TOKEN[route](other)
    assert (caught.value.status, caught.value.message) == (401, "invalid token")
    assert caught.value.request_id  # every answer carries X-Request-ID: the way into the server's logs


@pytest.mark.parametrize("route", sorted(WITH_TOKEN | WITHOUT_TOKEN))
def test_an_unknown_pool_is_not_found_not_an_empty_queue(lmstfy_server: Server, namespace: str, route: str) -> None:
    with (
        Client(lmstfy_server.data_url, namespace, "nopool:sometoken", retries=0) as client,
        pytest.raises(NotFound) as caught,
    ):
        (WITH_TOKEN | WITHOUT_TOKEN)[route](client)
    assert (caught.value.status, caught.value.message) == (404, "pool not found")


def test_unknown_jobs_are_not_found(client: Client) -> None:
    for verb in (client.release, client.touch, client.bury):
        with pytest.raises(NotFound, match="job not found"):
            verb("q", UNKNOWN_ID)
    for dead_verb in (client.respawn_dead_job, client.delete_dead_job):
        with pytest.raises(NotFound, match="job not found in the dead letter"):
            dead_verb("q", UNKNOWN_ID)
    with pytest.raises(NotFound):
        client.dead_jobs("q", after=UNKNOWN_ID)
    with pytest.raises(NotFound, match="schedule not found"):
        client.delete_schedule("q", "nothing")
    assert client.peek_job("q", UNKNOWN_ID) is None  # a look-up that finds nothing is no error
    assert client.get_schedule("q", "nothing") is None


def test_a_job_not_reserved_is_a_conflict(client: Client) -> None:
    job_id = client.publish("q", b"x", tries=2)
    for verb in (client.release, client.touch, client.bury):
        with pytest.raises(Conflict) as caught:
            verb("q", job_id)
        assert (caught.value.status, caught.value.message) == (409, "job is not reserved")
    assert client.size("q") == 1


BAD_CALLS: list[tuple[Callable[[Client], object], str]] = [
    (lambda c: c.publish("q", b"x", tries=0), "tries shouldn't be zero"),
    (lambda c: c.publish("q", b"x", ttl=5, delay=10), "ttl is shorter than delay"),
    (lambda c: c.publish("q", b"x", priority=256), "invalid priority"),
    (lambda c: c.publish("q", b"x", backoff_ms=5), "backoff_ms needs backoff=exponential"),
    (lambda c: c.publish("q", b"x", job_id="no spaces"), "invalid job_id: 1 to 128 characters of A-Z a-z 0-9 - _ . :"),
    (lambda c: c.publish_many("q", []), "no jobs"),
    (lambda c: c.publish_many("q", list(range(65))), "too many jobs"),
    (lambda c: c.publish_many("q", [1, 2], job_ids=["only-one"]), "job_id should name one id per job of the bulk"),
    (lambda c: c.consume_many("q", 101), "invalid count"),
    (lambda c: c.consume("q", ttr=-1), "invalid ttr"),
    (lambda c: c.ack("q", "not an id!"), "invalid job id"),
    (lambda c: c.touch("q", UNKNOWN_ID, ttr=0), "invalid ttr"),
    (lambda c: c.release("q", UNKNOWN_ID, reason="x" * 1025), "reason is longer than 1024 bytes"),
    (lambda c: c.publish("_hidden", b"x"), "queue name contains forbidden characters"),
    (lambda c: c.schedule("q", "beat", b"x"), "give cron=EXPR or every=SECONDS (one of them)"),
    (
        lambda c: c.schedule("q", "beat", b"x", cron="@hourly", every=60),
        "give cron=EXPR or every=SECONDS (one of them)",
    ),
    (lambda c: c.schedule("q", "beat", b"x", cron="61 * * * *"), "invalid cron: '61 * * * *' (Bad minute)"),
    (lambda c: c.schedule("q", "beat", b"x", every=0), "invalid every"),
    (
        lambda c: c.schedule("q", "beat", b"x", every=60, tz="Mars/Olympus"),
        "invalid tz: 'Mars/Olympus' is not an IANA time zone (like Europe/Paris)",
    ),
    (lambda c: c.schedule("q", "beat", b"x", every=60, tries=0), "tries shouldn't be zero"),
    (lambda c: c.schedule("q", "beat", b"x", every=60, catchup="all"), "invalid catchup"),  # type: ignore[arg-type]
    (
        lambda c: c.schedule("q", "a b", b"x", every=60),
        "invalid schedule name: letters, digits, - and _ only, at most 255",
    ),
]


@pytest.mark.parametrize(("call", "message"), BAD_CALLS, ids=[message for _, message in BAD_CALLS])
def test_bad_input_is_a_bad_request_with_the_servers_message(
    client: Client, call: Callable[[Client], object], message: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        call(client)
    assert (caught.value.status, caught.value.message) == (400, message)
    assert client.stats("q").ready == 0 and client.schedules("q") == []  # refused: nothing was stored


def test_a_body_over_one_mib_is_too_large(client: Client) -> None:
    with pytest.raises(PayloadTooLarge, match="body too large"):
        client.publish("q", b"x" * (1024 * 1024 + 1))
    assert client.size("q") == 0


def set_limit(lmstfy_server: Server, namespace: str, token: str, **limit: int) -> None:
    answer = httpx.post(f"{lmstfy_server.admin_url}/token/{namespace}/{token}/limit", json=limit, timeout=10)
    assert answer.status_code == 201, answer.text


def until_throttled(call: Callable[[], object], timeout: float = 3.0) -> Throttled:
    """The limit reaches the server's processes within a second: call until it bites."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            call()
        except Throttled as exc:
            return exc
        assert time.monotonic() < deadline, "never throttled"
        time.sleep(0.05)


def test_a_rate_limit_is_throttled_with_the_servers_message(
    lmstfy_server: Server, client: Client, namespace: str, token: str
) -> None:
    set_limit(lmstfy_server, namespace, token, read=1, write=1, interval=60)
    refused = until_throttled(lambda: client.publish("q", b"x"))
    assert refused.status == 429 and "produce reach the limit rate, please retry later" in refused.message
    assert "consume reach the limit rate" in until_throttled(lambda: client.consume("q")).message


async def test_the_async_client_raises_the_same(aclient: AsyncClient) -> None:
    with pytest.raises(Conflict, match="job is not reserved"):
        await aclient.touch("q", await aclient.publish("q", b"x"))
    with pytest.raises(BadRequest, match="invalid count"):
        await aclient.consume_many("q", 0)
    with pytest.raises(LmstfyError):
        await aclient.release("q", UNKNOWN_ID)
