"""SPEC 13 Stream through Client.events and AsyncClient.events against a real server (the resume over a real
restart: tests/e2e/test_events_e2e.py); and the SSE parser on chunkings a network may cut."""

from __future__ import annotations

import pytest

from lmstfy_py.client import AsyncClient, BadRequest, Client, Conflict, EventGap, QueueEvent
from lmstfy_py.client.events import SseParser


def test_events_replays_then_follows_with_every_field(client: Client) -> None:
    client.settings("q", events=100)
    job_id = client.publish("q", b"x", priority=4)
    stream = client.events("q", after="0")
    first = next(stream)
    assert isinstance(first, QueueEvent)
    assert (first.kind, first.job_id, first.queue, first.attempt) == ("published", job_id, "q", 0)
    assert first.fields["priority"] == 4 and first.ts_ms > 0 and first.cursor
    reserved = client.consume("q", ttr=30)
    assert reserved is not None
    second = next(stream)
    assert isinstance(second, QueueEvent) and (second.kind, second.attempt) == ("reserved", 1)
    stream.close()  # the generator's end closes its connection
    again = client.events("q", after=first.cursor)  # after a cursor: exactly what followed it
    resumed = next(again)
    assert isinstance(resumed, QueueEvent) and resumed.cursor == second.cursor
    again.close()


def test_events_of_a_queue_with_events_off_or_a_bad_cursor_raise(client: Client) -> None:
    with pytest.raises(Conflict, match="events are off for this queue"):
        next(client.events("off"))
    client.settings("q", events=10)
    with pytest.raises(BadRequest, match="invalid after"):
        next(client.events("q", after="not-a-cursor"))


async def test_async_events_merge_several_queues(aclient: AsyncClient) -> None:
    for queue in ("a", "b"):
        await aclient.settings(queue, events=10)
    ids = [await aclient.publish("a", b"1"), await aclient.publish("b", b"2")]
    stream = aclient.events(["a", "b"], after="0")
    found = [await anext(stream) for _ in range(2)]
    await stream.aclose()
    assert sorted((item.queue, item.job_id) for item in found if isinstance(item, QueueEvent)) == [
        ("a", ids[0]),
        ("b", ids[1]),
    ]


def test_the_parser_takes_frames_cut_anywhere_and_skips_comments() -> None:
    raw = (
        b': idle\n\nevent: gap\ndata: {"kind":"gap","queue":"q","lost":3}\n\n'
        b'id: 7\r\nevent: buried\r\ndata: {"kind":"buried","job_id":"j","queue":"q","ts_ms":1,"attempt":2,'
        b'"reason":"x"}\r\n\r\n'
    )
    for cut in range(1, len(raw)):
        parser = SseParser()
        items = parser.feed(raw[:cut]) + parser.feed(raw[cut:])
        assert items == [
            EventGap("q", 3),
            QueueEvent(
                "7",
                "buried",
                "j",
                "q",
                1,
                2,
                {"kind": "buried", "job_id": "j", "queue": "q", "ts_ms": 1, "attempt": 2, "reason": "x"},
            ),
        ], cut
