"""The hot routes parse a query string once and share it (web/hot_routes.py's shared_query and
options_of): what a request reads must be what a fresh parse would give, whatever was parsed
before it."""

from __future__ import annotations

import pytest

from lmstfy_py.config import Defaults
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import hot_routes, params
from lmstfy_py.web.hot_routes import Query, options_of, shared_query


def test_the_same_string_is_parsed_once_and_read_as_a_fresh_parse() -> None:
    raw = b"token=t&delay=5&ttl=60&tries=3&priority=2"
    first, again = shared_query(raw), shared_query(raw)
    assert first is again
    defaults = Defaults()
    options = options_of(first, params.publish_options, defaults)
    assert options_of(again, params.publish_options, defaults) is options
    assert options == params.publish_options(Query(raw), defaults)


def test_options_follow_the_defaults_they_were_read_with() -> None:
    query = shared_query(b"token=t")  # every option left to the defaults
    short, long = Defaults(ttl=10, tries=2), Defaults(ttl=99, tries=7)
    assert (
        options_of(query, params.publish_options, short).ttl_ms,
        options_of(query, params.publish_options, short).tries,
    ) == (10_000, 2)
    assert options_of(query, params.publish_options, long).ttl_ms == 99_000
    assert options_of(query, params.publish_options, long).tries == 7
    assert options_of(query, params.consume_options, Defaults(ttr=30)).ttr_ms == 30_000  # another parser, its own


def test_a_refused_query_is_refused_every_time() -> None:
    query = shared_query(b"token=t&delay=x")
    for _ in range(2):
        with pytest.raises(InvalidParameter, match="delay"):
            options_of(query, params.publish_options, Defaults())


def test_the_table_of_strings_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot_routes, "QUERIES_KEPT", 8)
    for n in range(20):
        query = shared_query(b"token=t&delay=%d" % n)
        assert query.getlist("delay") == [str(n)]
        assert len(hot_routes._queries) <= 8
    assert shared_query(b"token=t&delay=19") is query  # kept since the table last started again


def test_a_long_string_is_parsed_each_time_and_not_kept() -> None:
    raw = b"token=t&ack=" + b",".join(b"q:01J%023d" % n for n in range(100))  # a worker's consume
    first = shared_query(raw)
    assert first.getlist("ack") == [raw.split(b"ack=")[1].decode()]
    assert shared_query(raw) is not first
    assert raw not in hot_routes._queries


@pytest.mark.parametrize(
    "raw",
    [
        b"token=t&job_id=order-1",  # a business id: new in each publish
        b"token=t&job_id=01J0,01J1",  # a batch ACK's ids
        b"token=t&ack=q:01J0",  # a consume carrying ACKs
        b"&".join(b"p%d=1" % n for n in range(17)),  # more parameters than any route reads
    ],
)
def test_a_string_not_sent_twice_is_parsed_but_not_kept(raw: bytes) -> None:
    query = shared_query(raw)
    assert query.getlist("token") in (["t"], [])
    assert raw not in hot_routes._queries
    assert shared_query(raw) is not query


# -- names checked once (hot_routes._check_names, _queue_list) -----------------------------------


def test_checked_names_are_kept_bounded_and_bad_ones_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot_routes, "NAMES_KEPT", 8)
    for n in range(20):
        hot_routes._check_names("ns", f"q{n}")
        assert len(hot_routes._checked_names) <= 8
    assert ("ns", "q19") in hot_routes._checked_names
    for bad in ("_private", "a b", "x" * 256):
        for _ in range(2):
            with pytest.raises(InvalidParameter):
                hot_routes._check_names("ns", bad)
        assert ("ns", bad) not in hot_routes._checked_names


def test_a_queue_list_is_the_callers_own_and_only_short_lists_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot_routes, "LISTS_KEPT", 8)
    first = hot_routes._queue_list("ns", "a,,b")
    first.append("mutated")
    assert hot_routes._queue_list("ns", "a,,b") == ["a", "b"]
    for n in range(20):
        hot_routes._queue_list("ns", f"a,q{n}")
        assert len(hot_routes._queue_lists) <= 8
    # Sent before the token is checked: a list as long as a request head, or of many queues, is
    # checked each time and never kept; nor is an empty one (the caller refuses it).
    for queues in (",".join(f"q{n}" for n in range(9)), ",".join(["q" * 200] * 3), ",,"):
        assert hot_routes._queue_list("ns", queues) == [q for q in queues.split(",") if q]
        assert ("ns", queues) not in hot_routes._queue_lists
    with pytest.raises(InvalidParameter):
        hot_routes._queue_list("ns", "a,_b")
