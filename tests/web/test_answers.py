"""A consume's answer is encoded by orjson (web/answers.py `consumed_body`, for speed) to the bytes
that the standard library's encoder, which writes every other answer, gives for it: lmstfy's job
object with any attributes a publisher can send."""

from __future__ import annotations

import pytest

from lmstfy_py.types import Job, TraceContext
from lmstfy_py.web.answers import consumed_body, job_json, json_bytes

# Attribute values a publisher may send (X-Attribute-* headers, or a bulk body's JSON strings).
ATTRIBUTES = {
    "plain": "v",
    "non-ASCII": "é中文😀",
    "control characters": "\x00\x01\x1f\x7f\b\f\n\r\t",
    "quotes and backslashes": '"\\/',
    "line and paragraph separators": "\u2028\u2029",
    "a byte order mark": "\ufeff",
    "": "",
}
TRACE = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=a=b,other=é")


def jobs(how_many: int) -> list[Job]:
    # Ids that are not lmstfy's: their elapsed_ms is 0, the same at each encoding.
    return [
        Job("ns", "q", f"id-{n}", bytes(range(256)) * n, 2**32 - 1, 2**63 - 1, ATTRIBUTES, 1, None, TRACE)
        if n % 2
        else Job("ns", "q", f"id-{n}", b"", 0, 0, None)
        for n in range(how_many)
    ]


@pytest.mark.parametrize("count", [1, 2, 100])
def test_a_consume_answer_has_the_bytes_the_standard_library_gives(count: int) -> None:
    given = jobs(count if count > 1 else 2)[-count:]
    objects = [job_json(job, consumed=True) for job in given]
    expected = json_bytes(objects[0]) if count == 1 else json_bytes(objects)
    assert consumed_body(given, count) == expected
