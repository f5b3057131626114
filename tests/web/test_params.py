"""The request parsers alone: no app, no Redis."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager

import pytest
from starlette.datastructures import Headers, QueryParams

from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import bulk_jobs, params
from lmstfy_py.web.admin.request import form_values


def refused(message: str) -> AbstractContextManager[object]:
    return pytest.raises(InvalidParameter, match=f"^{re.escape(message)}$")


# Each of these is something Python's int() (or a lax parser) would take and Go's ParseUint refuses.
NOT_UINTS = ["+1", " 1", "1 ", "1.0", "-1", "1_0", "", "0x1", "1e3", "\u0661", "²", "9" * 5000]


@pytest.mark.parametrize("text", NOT_UINTS)
def test_uint_accepts_digits_only(text: str) -> None:
    with refused("invalid delay"):
        params.uint(QueryParams({"delay": text}), "delay", 0, 10**30)


def test_uint_bounds_and_default() -> None:
    query = QueryParams("a=4294967295&b=4294967296&c=007")
    assert params.seconds(query, "a", 1) == 2**32 - 1
    assert params.seconds(query, "c", 1) == 7
    assert params.seconds(query, "missing", 42) == 42
    with refused("invalid b"):
        params.seconds(query, "b", 1)


def test_repeated_parameter_uses_the_first_value_like_go() -> None:
    assert params.uint(QueryParams("n=1&n=x"), "n", 0, 10) == 1


def test_publish_options() -> None:
    defaults = Defaults()
    assert params.publish_options(QueryParams(""), defaults) == params.PublishOptions(0, 86_400_000, 1)
    assert params.publish_options(QueryParams("delay=10&ttl=0"), defaults).ttl_ms == 0
    job = params.publish_options(QueryParams("delay=2&ttl=3&tries=4"), defaults).job(b"x", None)
    assert (job.delay_ms, job.ttl_ms, job.tries, job.attributes) == (2000, 3000, 4, None)
    with refused("ttl is shorter than delay"):
        params.publish_options(QueryParams("delay=10&ttl=9"), defaults)
    with refused("tries shouldn't be zero"):
        params.publish_options(QueryParams("tries=0"), defaults)
    with refused("invalid tries"):
        params.publish_options(QueryParams("tries=65536"), defaults)


def test_milliseconds_variants() -> None:
    defaults = Defaults()
    job = params.publish_options(QueryParams("delay_ms=1500&ttl=2"), defaults).job(b"x", None)
    assert (job.delay_ms, job.ttl_ms) == (1500, 2000)
    assert params.consume_options(QueryParams("ttr_ms=250"), defaults).ttr_ms == 250
    with refused("give delay or delay_ms, not both"):
        params.publish_options(QueryParams("delay=1&delay_ms=1000"), defaults)
    with refused("give ttr or ttr_ms, not both"):
        params.consume_options(QueryParams("ttr=1&ttr_ms=1000"), defaults)
    with refused("ttl is shorter than delay"):
        params.publish_options(QueryParams("delay_ms=2001&ttl=2"), defaults)
    for bad in ("-1", "1.5", "4294967296", ""):
        with refused("invalid delay_ms"):
            params.publish_options(QueryParams(f"delay_ms={bad}"), defaults)


def test_consume_options_clamp_the_timeout() -> None:
    options = params.consume_options(QueryParams("timeout=4294967295&ttr=5&count=100"), Defaults())
    assert options == params.ConsumeOptions(ttr_ms=5000, timeout_ms=600_000, count=100)
    expected = params.ConsumeOptions(7000, 3000, 1)
    assert params.consume_options(QueryParams(""), Defaults(ttr=7, timeout=3)) == expected
    for bad in ("0", "101"):
        with refused("invalid count"):
            params.consume_options(QueryParams({"count": bad}), Defaults())


def test_limit_must_be_positive() -> None:
    assert params.limit(QueryParams("")) == 1
    assert params.limit(QueryParams("limit=9223372036854775807")) == 2**63 - 1
    for bad in ("0", "9223372036854775808", "-1"):
        with refused("invalid limit"):
            params.limit(QueryParams({"limit": bad}))


@pytest.mark.parametrize(
    ("ns", "queue", "error"),
    [
        ("n" * 256, "q", "namespace or queue name too long"),
        ("ns", "q" * 256, "namespace or queue name too long"),
        ("n.s", "q", "namespace name contains forbidden characters"),
        ("ns\n", "q", "namespace name contains forbidden characters"),
        ("ns", "_q", "queue name contains forbidden characters"),
        ("ns", "q,r", "queue name contains forbidden characters"),
        ("ns", "é", "queue name contains forbidden characters"),
    ],
)
def test_bad_names(ns: str, queue: str, error: str) -> None:
    with refused(f"{error}"):
        params.check_names(ns, queue)


def test_good_names() -> None:
    params.check_names("n" * 255, "q" * 255)
    params.check_names("A-z_0", "q_-")


def test_queue_list() -> None:
    assert params.queue_list("ns", "a,,b,") == ["a", "b"]
    assert params.queue_list("ns", ",,") == []
    with refused("queue name contains forbidden characters"):
        params.queue_list("ns", "a,_b")
    with refused("namespace or queue name too long"):
        params.queue_list("ns", "a," + "b" * 256)


def test_split_token() -> None:
    assert params.split_token("abc") == ("default", "abc")
    assert params.split_token("p:abc") == ("p", "abc")
    assert params.split_token("p:a:b") == ("p", "a:b")
    assert params.split_token(":abc") == ("", "abc")


def test_bulk_bodies_keep_each_element_text() -> None:
    raw = b' [ {"a": 1}, "x" ,1.0e2,[ ],null,\n"\xff"] '
    assert bulk_jobs.bulk_bodies(raw) == [b'{"a": 1}', b'"x"', b"1.0e2", b"[ ]", b"null", b'"\xff"']


@pytest.mark.parametrize(
    "raw", [b"", b"{}", b'{"a":1}', b"[1,]", b"[1 2]", b"[1] x", b"[NaN]", b"[", b"\xef\xbb\xbf[1]", b"[" * 100_000]
)
def test_bulk_bodies_refuse_what_is_not_a_json_array(raw: bytes) -> None:
    with refused("request body should be an array of objects"):
        bulk_jobs.bulk_bodies(raw)


def test_bulk_bodies_count() -> None:
    assert len(bulk_jobs.bulk_bodies(b"[" + b",".join([b"1"] * 64) + b"]")) == 64
    for raw in (b"[]", b" [ ] ", b"null"):
        with refused("no jobs"):
            bulk_jobs.bulk_bodies(raw)
    with refused("too many jobs"):
        bulk_jobs.bulk_bodies(b"[" + b",".join([b"1"] * 65) + b"]")


def _headers(*pairs: tuple[str, str]) -> Headers:
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


def test_attributes_need_enable_job_version() -> None:
    assert params.attributes(_headers(("Job-Attr-A", "1"))) is None
    assert params.attributes(_headers(("Enable-Job-Version", "no"), ("Job-Attr-A", "1"))) is None
    assert params.attributes(_headers(("Enable-Job-Version", "yEs"))) == {}


def test_attributes_are_lowered_truncated_and_first_wins() -> None:
    found = params.attributes(
        _headers(
            ("Enable-Job-Version", "YES"),
            ("Job-Attr-Color", "red"),
            ("job-attr-color", "blue"),
            ("Job-Attr-" + "K" * 40, "v" * 200),
            ("Job-Attr-Empty", ""),
            ("Other", "x"),
        )
    )
    assert found == {"color": "red", "k" * 32: "v" * 128}


def test_too_many_attributes() -> None:
    sixteen = [("Enable-Job-Version", "YES")] + [(f"Job-Attr-K{i}", "v") for i in range(16)]
    assert len(params.attributes(_headers(*sixteen)) or {}) == 16
    with refused("too many attributes"):
        params.attributes(_headers(*sixteen, ("Job-Attr-K16", "v")))


def test_form_values_body_first_then_query() -> None:
    query = QueryParams("description=q&token=t1&token=t2")
    found = form_values(b"description=b&x=%41", "application/x-www-form-urlencoded; charset=utf-8", query)
    assert found == {"description": "b", "x": "A", "token": "t1"}
    assert form_values(b"description=b", "text/plain", query)["description"] == "q"
