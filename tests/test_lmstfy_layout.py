"""The lmstfy 1.0.10 layout fixtures (tests/lmstfy_layout.py) against a real Redis.

Byte-exact expectations come from lmstfy's own tests (bitleak/lmstfy engine/redis/*_test.go,
uuid/uuid_test.go, auth/token_test.go), each named where used; the rest are round trips and
the state transitions lmstfy's engine makes. The last test ties the keys a full scenario
leaves to the table of docs/LMSTFY_LAYOUT.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.lmstfy_layout import (
    KEY_TEMPLATES,
    PUMP_BATCH,
    PUSH_METAS,
    PUSH_METAS_VERSION,
    THROTTLER_KEY,
    TIMER_SET,
    Limit,
    LmstfyAdmin,
    LmstfyPool,
    Pusher,
    ReadyElement,
    TimerMember,
    dead_key,
    decode_job_data,
    elapsed_ms,
    encode_job_data,
    every_state,
    job_id_delay_s,
    job_id_time_ms,
    job_id_version,
    job_key,
    new_job_id,
    new_ulid,
    pack_ready,
    pack_timer_member,
    queues_key,
    ready_key,
    template_regex,
    throttle_counter_key,
    token_key,
    unpack_ready,
    unpack_timer_member,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "LMSTFY_LAYOUT.md"
NOW = 1_700_000_000  # a fixed unix second, so what is due is the test's choice


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def pool(client: redis.Redis) -> LmstfyPool:
    return LmstfyPool(client)


@pytest.fixture
def admin(client: redis.Redis) -> LmstfyAdmin:
    return LmstfyAdmin(client)


# --- packing, without Redis ----------------------------------------------------------------------


def test_ready_element_is_lmstfys_struct_pack() -> None:
    # engine/redis/queue_test.go TestStructPacking: tries 23, id " a test ID#" (11 bytes).
    packed = pack_ready(23, " a test ID#")
    assert packed == b"\x17\x00\x0b\x00 a test ID#"
    assert unpack_ready(packed) == ReadyElement(23, " a test ID#")
    assert unpack_ready(pack_ready(65535, "01HZZZZZZZZZZZZZZZZZZZZZZZ")).tries == 65535


def test_a_ready_element_whose_length_lies_is_refused() -> None:
    # structUnpack answers "corrupted data" when the id is not as long as its length says.
    with pytest.raises(ValueError, match="corrupted data"):
        unpack_ready(b"\x01\x00\x05\x00abc")


def test_timer_member_is_lmstfys_struct_pack() -> None:
    # engine/redis/timer_test.go TestTimer_Tick: namespace "ns-timer", queue "q2", tries 1.
    job_id = "01HGW2N7EBS4Y3Q7WKX1C3MZV0"
    packed = pack_timer_member("ns-timer", "q2", 1, job_id)
    assert packed == b"\x08\x00ns-timer" + b"\x02\x00q2" + b"\x01\x00\x1a\x00" + job_id.encode()
    assert unpack_timer_member(packed) == TimerMember("ns-timer", "q2", 1, job_id)
    with pytest.raises(ValueError):
        unpack_timer_member(packed[:-1])


def test_job_id_is_a_ulid_carrying_its_delay() -> None:
    # A ULID's Crockford text of 16 known bytes (the ULID example of miyako/4d-plugin-ULID's
    # README: 0000587cea2c04040404040404040404 <-> 0001C7STHC0G2081040G208104); lmstfy puts the
    # delay in the last 4 bytes, little-endian, so these bytes are a delay of 0x04040404 s.
    job_id = new_job_id(0x04040404, now_ms=0x587CEA2C, entropy=b"\x04" * 6)
    assert job_id == "0001C7STHC0G2081040G208104"
    assert (job_id_time_ms(job_id), job_id_delay_s(job_id), job_id_version(job_id)) == (0x587CEA2C, 0x04040404, 0)


def test_job_id_delay_and_elapsed_as_lmstfys_uuid_test() -> None:
    # uuid/uuid_test.go TestJobID: an id made with delay 10 gives back 10, and ~10 ms elapsed.
    job_id = new_job_id(10)
    time.sleep(0.01)
    assert len(job_id) == 26 and job_id_delay_s(job_id) == 10
    assert 10 <= elapsed_ms(job_id, time.time_ns() // 1_000_000) < 1000
    # An id from the future has elapsed 0 (ElapsedMilliSecondFromUniqueID's error, read as 0).
    assert elapsed_ms(new_job_id(0, now_ms=2_000_000_000_000), 1_000) == 0


def test_versioned_job_id_has_a_digit_prefix() -> None:
    # engine/redis/pool_test.go TestPool_GetCompatibility: GenJobIDWithVersion(i, 123), i = 0, 1.
    legacy, versioned = new_job_id(123), new_job_id(123, version=1)
    assert (len(legacy), job_id_version(legacy), job_id_delay_s(legacy)) == (26, 0, 123)
    assert (len(versioned), versioned[0], job_id_version(versioned), job_id_delay_s(versioned)) == (27, "1", 1, 123)


def test_tokens_are_plain_ulids() -> None:
    token = new_ulid(now_ms=NOW * 1000)
    assert len(token) == 26 and job_id_time_ms(token) == NOW * 1000


def test_job_data_is_the_body_unless_the_id_is_versioned() -> None:
    # engine/redis/pool_test.go TestPool_GetCompatibility: body "hello msg 5" under both ids.
    body = b"hello msg 5"
    legacy, versioned = new_job_id(123), new_job_id(123, version=1)
    assert encode_job_data(legacy, body) == body
    assert encode_job_data(versioned, body) == b'{"body":"aGVsbG8gbXNnIDU="}'
    with_attributes = encode_job_data(versioned, body, {"hello": "world", "foo": "a<b"})
    assert with_attributes == b'{"body":"aGVsbG8gbXNnIDU=","attributes":{"foo":"a\\u003cb","hello":"world"}}'
    assert decode_job_data(versioned, with_attributes) == (body, {"foo": "a<b", "hello": "world"})
    assert decode_job_data(legacy, body) == (body, None)
    assert decode_job_data(versioned, b'{"body":""}') == (b"", None)


# --- a data pool ---------------------------------------------------------------------------------


def test_publish_writes_data_ready_element_and_registry(pool: LmstfyPool, client: redis.Redis) -> None:
    job_id = pool.publish("ns", "q", b"\x00hello\xff", ttl=60, tries=3, now=NOW)
    assert client.get(f"j/ns/q/{job_id}") == b"\x00hello\xff"
    assert 58 <= client.ttl(f"j/ns/q/{job_id}") <= 60
    assert client.lrange("q/ns/q", 0, -1) == [pack_ready(3, job_id)]
    assert client.hgetall("m/ns") == {b"ns": b"1"}
    assert client.hgetall("m/ns/ns") == {b"q": b"1"}
    assert job_id_time_ms(job_id) == NOW * 1000 and job_id_delay_s(job_id) == 0
    assert client.zcard(TIMER_SET) == 0


def test_ttl_zero_means_the_data_never_expires(pool: LmstfyPool, client: redis.Redis) -> None:
    job_id = pool.publish("ns", "q", b"x", ttl=0)
    assert client.ttl(job_key("ns", "q", job_id)) == -1


def test_publishing_an_existing_id_fails_as_lmstfys_setnx(pool: LmstfyPool) -> None:
    job_id = new_job_id(0)
    pool.put_job("ns", "q", job_id, b"first", 60)
    with pytest.raises(ValueError, match="key existed"):
        pool.put_job("ns", "q", job_id, b"second", 60)
    stored = pool.job("ns", "q", job_id)
    assert stored is not None and stored.body == b"first"


def test_a_delayed_job_waits_in_the_timer_in_seconds(pool: LmstfyPool, client: redis.Redis) -> None:
    job_id = pool.publish("ns", "q", b"later", ttl=120, delay=30, tries=2, now=NOW)
    assert job_id_delay_s(job_id) == 30
    assert client.llen(ready_key("ns", "q")) == 0
    assert client.zrange(TIMER_SET, 0, -1, withscores=True) == [(pack_timer_member("ns", "q", 2, job_id), NOW + 30.0)]
    assert pool.pump(NOW + 29) == 0
    assert pool.pump(NOW + 30) == 1
    assert pool.ready("ns", "q") == [ReadyElement(2, job_id)] and pool.timer() == []


def test_timer_tick_moves_a_due_job_with_its_tries(pool: LmstfyPool) -> None:
    # engine/redis/timer_test.go TestTimer_Tick: data in the pool, timer entry tries 1 due in 3 s,
    # and the ready list then yields (1, id).
    job_id = new_job_id(0)
    pool.put_job("ns-timer", "q2", job_id, b"hello msg 2", 5)
    pool.add_timer("ns-timer", "q2", job_id, 1, NOW + 3)
    assert pool.pump(NOW + 2) == 0
    assert pool.pump(NOW + 3) == 1
    assert pool.ready("ns-timer", "q2") == [ReadyElement(1, job_id)]


def test_tries_run_down_through_the_timer_into_the_dead_letter(pool: LmstfyPool, client: redis.Redis) -> None:
    # engine/redis/queue_test.go TestQueue_Tries: tries 2 -> a poll returns 1, the next 0.
    job_id = pool.publish("ns", "q", b"work", ttl=600, tries=2, now=NOW)
    first = pool.reserve("ns", ["q"], ttr=1, now=NOW)
    assert first is not None and (first.job_id, first.remaining_tries, first.body) == (job_id, 1, b"work")
    assert 598 <= first.ttl <= 600
    assert pool.ready("ns", "q") == []
    assert pool.timer() == [(TimerMember("ns", "q", 1, job_id), NOW + 1)]

    assert pool.pump(NOW + 1) == 1
    assert pool.ready("ns", "q") == [ReadyElement(1, job_id)]
    second = pool.reserve("ns", ["q"], ttr=1, now=NOW + 1)
    assert second is not None and second.remaining_tries == 0
    assert pool.timer() == [(TimerMember("ns", "q", 0, job_id), NOW + 2)]

    assert pool.pump(NOW + 2) == 1
    assert pool.dead("ns", "q") == [ReadyElement(1, job_id)]
    assert pool.ready("ns", "q") == [] and pool.timer() == []
    assert client.ttl(job_key("ns", "q", job_id)) == -1  # the pump PERSISTs a dead job


def test_a_pushers_reservation_keeps_the_tries(pool: LmstfyPool) -> None:
    # engine/redis/queue.go PollWithFrozenTries (go-redis v8 copy): the timer member keeps them.
    job_id = pool.publish("ns", "q", b"x", tries=2, now=NOW)
    got = pool.reserve("ns", ["q"], ttr=10, now=NOW, frozen=True)
    assert got is not None and got.remaining_tries == 2
    assert pool.timer() == [(TimerMember("ns", "q", 2, job_id), NOW + 10)]


def test_reserve_takes_the_first_queue_that_has_a_job(pool: LmstfyPool) -> None:
    low = pool.publish("ns", "low", b"l", now=NOW)
    high = pool.publish("ns", "high", b"h", now=NOW)
    got = pool.reserve("ns", ["high", "low"], ttr=30, now=NOW)
    assert got is not None and (got.queue, got.job_id) == ("high", high)
    got = pool.reserve("ns", ["high", "low"], ttr=30, now=NOW)
    assert got is not None and (got.queue, got.job_id) == ("low", low)
    assert pool.reserve("ns", ["high", "low"], ttr=30, now=NOW) is None


def test_the_oldest_ready_job_is_consumed_first(pool: LmstfyPool) -> None:
    first = pool.publish("ns", "q", b"1", now=NOW)
    second = pool.publish("ns", "q", b"2", now=NOW)
    assert [e.job_id for e in pool.ready("ns", "q")] == [first, second]
    got = pool.reserve("ns", ["q"], ttr=30, now=NOW)
    assert got is not None and got.job_id == first


def test_consuming_a_job_whose_data_is_gone_leaves_a_stale_timer_member(pool: LmstfyPool) -> None:
    job_id = pool.publish("ns", "q", b"x", now=NOW)
    pool.ack("ns", "q", job_id)  # ACK is DEL of the data only: the ready element stays
    assert pool.ready("ns", "q") == [ReadyElement(1, job_id)]
    assert pool.reserve("ns", ["q"], ttr=5, now=NOW) is None
    assert pool.timer() == [(TimerMember("ns", "q", 0, job_id), NOW + 5)]
    # ... which the pump drops without pushing anything anywhere.
    assert pool.pump(NOW + 5) == 1
    assert pool.timer() == [] and pool.ready("ns", "q") == [] and pool.dead("ns", "q") == []


def test_the_pump_moves_at_most_one_batch_per_call(pool: LmstfyPool) -> None:
    for _ in range(PUMP_BATCH + 1):
        pool.publish("ns", "q", b"x", delay=1, now=NOW)
    assert pool.pump(NOW + 1) == PUMP_BATCH
    assert pool.pump(NOW + 1) == 1
    assert len(pool.ready("ns", "q")) == PUMP_BATCH + 1


def test_dead_letter_keeps_the_oldest_at_its_tail(pool: LmstfyPool, client: redis.Redis) -> None:
    # engine/redis/deadletter_test.go TestDeadLetter_Peek and _Delete: bury x, y, z; the head
    # shown is x; deleting 2 leaves z.
    for job_id in ("x", "y", "z"):
        pool.bury("ns-dead", "q1", job_id)
    assert [e.job_id for e in pool.dead("ns-dead", "q1")] == ["x", "y", "z"]
    assert client.lindex(dead_key("ns-dead", "q1"), -1) == pack_ready(1, "x")
    assert pool.delete_dead("ns-dead", "q1", 2) == 2
    assert pool.dead("ns-dead", "q1") == [ReadyElement(1, "z")]


def test_respawn_moves_the_oldest_dead_back_with_a_new_ttl(pool: LmstfyPool, client: redis.Redis) -> None:
    # engine/redis/deadletter_test.go TestDeadLetter_Respawn: 3 jobs with ttl 60 die (ttl
    # removed), respawn 2 with ttl 10 gives job1 first with a ttl of ~10 s, then job3 alone.
    ids = [pool.publish("ns-dead", "q3", str(n).encode(), ttl=60, delay=5, now=NOW) for n in (1, 2, 3)]
    for job_id in ids:
        pool.bury("ns-dead", "q3", job_id)
    assert client.ttl(job_key("ns-dead", "q3", ids[0])) == -1
    assert pool.respawn("ns-dead", "q3", limit=2, ttl=10) == 2
    got = pool.reserve("ns-dead", ["q3"], ttr=1, now=NOW)
    assert got is not None and got.job_id == ids[0] and 8 <= got.ttl <= 10
    assert got.remaining_tries == 0  # a respawned job has one try ("HHc0"(1, id) moved as is)
    pool.reserve("ns-dead", ["q3"], ttr=1, now=NOW)
    assert pool.respawn("ns-dead", "q3", limit=1, ttl=10) == 1
    got = pool.reserve("ns-dead", ["q3"], ttr=1, now=NOW)
    assert got is not None and got.job_id == ids[2]
    assert pool.respawn("ns-dead", "q3", limit=5) == 0


def test_respawn_with_ttl_zero_keeps_the_job_forever(pool: LmstfyPool, client: redis.Redis) -> None:
    job_id = pool.publish("ns", "q", b"x", ttl=60, now=NOW)
    pool.bury("ns", "q", job_id)
    assert pool.respawn("ns", "q", ttl=0) == 1
    assert client.ttl(job_key("ns", "q", job_id)) == -1


def test_versioned_job_round_trips_through_redis(pool: LmstfyPool, client: redis.Redis) -> None:
    job_id = pool.publish("ns", "q", b"hello", versioned=True, attributes={"trace": "abc"}, now=NOW)
    assert len(job_id) == 27 and job_id.startswith("1")
    assert client.get(job_key("ns", "q", job_id)) == b'{"body":"aGVsbG8=","attributes":{"trace":"abc"}}'
    stored = pool.job("ns", "q", job_id)
    assert stored is not None and (stored.body, stored.attributes) == (b"hello", {"trace": "abc"})
    assert pool.ready("ns", "q") == [ReadyElement(1, job_id)]


# --- the admin Redis -----------------------------------------------------------------------------


def test_tokens_live_in_a_hash_per_pool_and_namespace(admin: LmstfyAdmin, client: redis.Redis) -> None:
    # auth/token_test.go TestTokenKey and TestTokenManager_New: "tk/default/test-ns" for the
    # default pool, "tk/test-pool/test-ns" otherwise, and a custom pool's token is handed out
    # as "test-pool:test-new-token".
    assert token_key("", "test-ns") == "tk/default/test-ns"
    assert token_key("test-pool", "test-ns") == "tk/test-pool/test-ns"
    made = admin.create_token("test-ns", "the team's token")
    assert len(made) == 26 and client.hget("tk/default/test-ns", made) == b"the team's token"
    assert admin.create_token("test-ns", "", pool="test-pool", token="test-new-token") == "test-pool:test-new-token"
    assert client.hgetall("tk/test-pool/test-ns") == {b"test-new-token": b""}
    with pytest.raises(ValueError):
        admin.create_token("test-ns", "again", pool="test-pool", token="test-new-token")
    assert admin.tokens("test-ns") == {made: "the team's token"}


def test_limits_are_json_fields_of_one_hash(admin: LmstfyAdmin, client: redis.Redis) -> None:
    admin.set_limit("ns", "TOKEN1", Limit(read=10, write=20, interval=1))
    admin.set_limit("ns", "TOKEN2", Limit(read=0, write=5, interval=60), pool="other")
    assert client.hget(THROTTLER_KEY, "default/ns/TOKEN1") == b'{"read":10,"write":20,"interval":1}'
    assert admin.limits() == {
        ("default", "ns", "TOKEN1"): Limit(10, 20, 1),
        ("other", "ns", "TOKEN2"): Limit(0, 5, 60),
    }


def test_throttle_counters_expire_with_their_window(admin: LmstfyAdmin, client: redis.Redis) -> None:
    assert [admin.take("ns", "TOKEN1", read=True, interval=7) for _ in range(3)] == [1, 2, 3]
    key = throttle_counter_key("default", "ns", "TOKEN1", read=True)
    assert key == "l/default/ns/TOKEN1/r"
    assert client.get(key) == b"3" and 6 <= client.ttl(key) <= 7
    assert admin.take("ns", "TOKEN1", read=False, interval=7) == 1
    assert client.exists("l/default/ns/TOKEN1/w") == 1


def test_pushers_are_json_fields_with_a_version_counter(admin: LmstfyAdmin, client: redis.Redis) -> None:
    pusher = Pusher(("high", "low"), "http://billing:8080/jobs", workers=8, timeout=10)
    admin.create_pusher("ns", "billing", pusher)
    raw = client.hget(PUSH_METAS, "pm/default/ns/billing")
    assert raw == b'{"queues":["high","low"],"endpoint":"http://billing:8080/jobs","workers":8,"timeout":10}'
    assert client.get(PUSH_METAS_VERSION) == b"1"
    with pytest.raises(ValueError, match="already exists"):
        admin.create_pusher("ns", "billing", pusher)
    assert client.get(PUSH_METAS_VERSION) == b"1"
    # A pusher stored before groups existed has no "queues": its field named the queue.
    client.hset(PUSH_METAS, "pm/default/ns/orders", '{"endpoint":"http://o/","workers":1,"timeout":5}')
    assert admin.pushers() == {
        ("default", "ns", "billing"): pusher,
        ("default", "ns", "orders"): Pusher(("orders",), "http://o/", 1, 5),
    }


# --- the keys, against the doc -------------------------------------------------------------------


def _documented_keys() -> dict[str, str]:
    """The rows of the key table in docs/LMSTFY_LAYOUT.md: `template` -> type."""
    section = DOC.read_text().split("<!-- keys -->")[1].split("<!-- /keys -->")[0]
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \|", section, flags=re.MULTILINE)
    return dict(rows)


def test_the_doc_lists_exactly_the_keys_the_fixtures_know() -> None:
    assert _documented_keys() == KEY_TEMPLATES


def test_a_full_scenario_writes_exactly_the_documented_keys(
    pool: LmstfyPool, admin: LmstfyAdmin, client: redis.Redis
) -> None:
    ids = every_state(pool, admin, NOW)
    patterns = {template: template_regex(template) for template in KEY_TEMPLATES}
    hit: set[str] = set()
    for key in (k.decode() for k in client.scan_iter(count=1000)):
        matching = [t for t, p in patterns.items() if p.fullmatch(key)]
        assert len(matching) == 1, f"{key!r} matches {matching}"
        assert client.type(key).decode() == KEY_TEMPLATES[matching[0]], key
        hit.add(matching[0])
    assert hit == set(KEY_TEMPLATES)
    assert set(client.hkeys(queues_key("ns"))) == {b"ready", b"delayed", b"reserved"}
    assert pool.ready("ns", "ready") == [ReadyElement(2, ids["ready"])]
    # Equal scores sort by member bytes: len("delayed") 7 < len("reserved") 8.
    assert pool.timer() == [
        (TimerMember("ns", "delayed", 1, ids["delayed"]), NOW + 30),
        (TimerMember("ns", "reserved", 2, ids["reserved"]), NOW + 30),
    ]
    assert pool.dead("other", "dead") == [ReadyElement(1, ids["dead"])]
