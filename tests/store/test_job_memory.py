"""How a job's hash is stored to take less memory (issue 27), and jobs stored by the versions before.

A job's data is stored in pieces of 64 bytes (fields d, d2, d3...: lua/_lib.lua's data_fields), so
that the hash of a small job stays a listpack. A job stored before, its data whole in field d, must
still be read, consumed, released, buried, respawned and ACKed: an upgrade on a live Redis. A job
whose id the engine made keeps no field c (created): its id tells; a job stored before keeps its c.
"""

from __future__ import annotations

import asyncio

import pytest

from lmstfy_py import ids
from lmstfy_py.store import jobdata, keys
from lmstfy_py.store.engine import Engine, now_ms
from lmstfy_py.store.jobdata import encode_data
from lmstfy_py.store.pump import Pump
from lmstfy_py.types import NewJob

NS = "mem"
ATTRIBUTES = {"k": "v"}


async def store_whole(engine: Engine, queue: str, job_id: str) -> None:
    """Rewrites a job's data as versions before this layout stored it: whole, in field d."""
    key = keys.job(NS, queue, job_id)
    stored = await engine.redis.hgetall(key)
    pieces = sorted((f for f in stored if f.startswith(b"d")), key=lambda f: int(f[1:] or b"1"))
    data = b"".join(stored[f] for f in pieces)
    await engine.redis.hdel(key, *pieces)
    await engine.redis.hset(key, "d", data)
    assert await engine.redis.hkeys(key) and await engine.redis.hget(key, "d") == data


async def test_a_small_job_hash_stays_a_listpack(engine: Engine) -> None:
    body = bytes(range(100))
    job_id = (await engine.publish(NS, "small", NewJob(body, delay_ms=3_600_000))).job_id
    key = keys.job(NS, "small", job_id)
    assert await engine.redis.object("encoding", key) == b"listpack"
    stored = await engine.redis.hgetall(key)
    assert (len(stored[b"d"]), len(stored[b"d2"])) == (64, len(encode_data(body, None)) - 64)
    assert (await engine.peek_job(NS, "small", job_id)).job.body == body


# msgpack [body, {"k": "v"}] is the body and 8 bytes (bin8) or 9 (bin16, from 256 bytes): the
# data is then 8, 63, 64, 65, 128, 129, 512 (8 pieces, the most) and 513 (stored whole) bytes long.
@pytest.mark.parametrize("size", [0, 55, 56, 57, 120, 121, 503, 504, 70_000])
@pytest.mark.parametrize("whole", [False, True], ids=["pieces", "stored-before"])
async def test_data_of_any_length_reads_back_through_every_step(engine: Engine, size: int, whole: bool) -> None:
    queue = f"q{size}"
    body = bytes(i % 251 for i in range(size))
    job_id = (await engine.publish(NS, queue, NewJob(body, tries=2, attributes=ATTRIBUTES))).job_id
    data = encode_data(body, ATTRIBUTES)
    pieces = [f for f in await engine.redis.hkeys(keys.job(NS, queue, job_id)) if f.startswith(b"d")]
    assert len(pieces) == (-(-len(data) // 64) if 0 < len(data) <= 512 else 1)
    if whole:
        await store_whole(engine, queue, job_id)
    assert (await engine.peek_queue(NS, queue)).body == body
    [ahead] = await engine.next_jobs(NS, queue, 5)
    assert (ahead.job.body, ahead.job.attributes) == (body, ATTRIBUTES)
    [job] = await engine.consume(NS, [queue], ttr_ms=60_000, timeout_ms=0, count=1)
    assert (job.job_id, job.body, job.attributes, job.remain_tries) == (job_id, body, ATTRIBUTES, 1)
    info = await engine.peek_job(NS, queue, job_id)
    assert (info.state, info.job.body) == ("reserved", body)

    await engine.release(NS, queue, job_id, delay_ms=0, reason="again")
    [job] = await engine.consume(NS, [queue], ttr_ms=60_000, timeout_ms=0, count=1)
    assert (job.body, job.attempts, job.remain_tries) == (body, 2, 0)
    await engine.bury(NS, queue, job_id, "no")
    page = await engine.dead_page(NS, queue, 10, None)
    assert [(d.job_id, d.body, d.last_error) for d in page.jobs] == [(job_id, body, "no")]
    assert (await engine.peek_job(NS, queue, job_id)).job.body == body

    assert await engine.respawn(NS, queue, 10, 60_000) == 1
    [job] = await engine.consume(NS, [queue], ttr_ms=60_000, timeout_ms=0, count=1)
    assert (job.job_id, job.body) == (job_id, body)
    assert await engine.ack(NS, queue, job_id) is True
    assert not await engine.redis.exists(keys.job(NS, queue, job_id))


@pytest.mark.parametrize("size", [60, 100, 300])
async def test_a_delayed_job_stored_before_is_moved_by_the_pump(engine: Engine, pump: Pump, size: int) -> None:
    queue = f"delayed{size}"
    body = bytes(i % 7 for i in range(size))
    job_id = (await engine.publish(NS, queue, NewJob(body, delay_ms=300))).job_id
    await store_whole(engine, queue, job_id)
    assert (await engine.peek_job(NS, queue, job_id)).state == "delayed"
    [job] = await engine.consume(NS, [queue], ttr_ms=60_000, timeout_ms=3000, count=1)
    assert (job.job_id, job.body) == (job_id, body)
    assert await engine.ack(NS, queue, job_id) is True


async def test_a_reserved_job_stored_before_goes_dead_when_its_ttr_passes(engine: Engine, pump: Pump) -> None:
    body = b"x" * 100
    job_id = (await engine.publish(NS, "ttr", NewJob(body))).job_id
    await store_whole(engine, "ttr", job_id)
    assert len(await engine.consume(NS, ["ttr"], ttr_ms=100, timeout_ms=0, count=1)) == 1
    for _ in range(100):
        if (page := await engine.dead_page(NS, "ttr", 10, None)).jobs:
            break
        await asyncio.sleep(0.05)
    assert [(d.job_id, d.body) for d in page.jobs] == [(job_id, body)]


async def test_a_job_stored_before_still_expires(engine: Engine) -> None:
    job_id = (await engine.publish(NS, "ttl", NewJob(b"y" * 100, ttl_ms=100))).job_id
    await store_whole(engine, "ttl", job_id)
    assert await engine.redis.pexpire(keys.job(NS, "ttl", job_id), 100)
    await asyncio.sleep(0.2)
    assert await engine.consume(NS, ["ttl"], ttr_ms=60_000, timeout_ms=0, count=1) == []


async def test_a_job_whose_id_tells_when_it_was_created_keeps_no_field_c(engine: Engine) -> None:
    job_id = (await engine.publish(NS, "made", NewJob(b"z" * 100))).job_id
    assert b"c" not in await engine.redis.hkeys(keys.job(NS, "made", job_id))
    [ahead] = await engine.next_jobs(NS, "made", 1)
    assert ahead.job.created_ms == ids.timestamp_ms(job_id)
    [job] = await engine.consume(NS, ["made"], ttr_ms=60_000, timeout_ms=0, count=1)
    assert job.created_ms == ids.timestamp_ms(job_id) and 0 <= job.elapsed_ms < 5000
    assert (await engine.peek_job(NS, "made", job_id)).job.created_ms == ids.timestamp_ms(job_id)


async def test_a_business_id_keeps_field_c_even_when_it_looks_like_ours(engine: Engine) -> None:
    lookalike = jobdata.new_job_id(0, 0, now_ms() - 3_600_000)  # an hour older than the job
    for job_id in ["order-42", lookalike]:
        await engine.publish(NS, "business", NewJob(b"b", job_id=job_id))
        stored = await engine.redis.hget(keys.job(NS, "business", job_id), "c")
        assert stored is not None and abs(int(stored) - now_ms()) < 5000
        [job] = await engine.consume(NS, ["business"], ttr_ms=60_000, timeout_ms=0, count=1)
        assert (job.job_id, job.created_ms) == (job_id, int(stored)) and job.elapsed_ms < 5000


async def test_field_c_of_a_job_stored_before_still_wins_over_its_id(engine: Engine) -> None:
    job_id = (await engine.publish(NS, "kept", NewJob(b"k" * 100))).job_id
    await store_whole(engine, "kept", job_id)
    created = ids.timestamp_ms(job_id) - 5000
    await engine.redis.hset(keys.job(NS, "kept", job_id), "c", created)
    assert (await engine.peek_job(NS, "kept", job_id)).job.created_ms == created
    [ahead] = await engine.next_jobs(NS, "kept", 1)
    assert ahead.job.created_ms == created
    [job] = await engine.consume(NS, ["kept"], ttr_ms=60_000, timeout_ms=0, count=1)
    assert job.created_ms == created and job.elapsed_ms >= 5000
