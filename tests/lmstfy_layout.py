"""lmstfy 1.0.10's Redis layout, written and read as lmstfy does: fixtures for SPEC section 12.

Tests of "serving lmstfy's data in place" need a Redis that looks exactly as if lmstfy had been
running on it: job data, ready lists, the timer zset with its binary members, dead letters,
the namespace registry (a data pool), and tokens, throttle limits and pushers (the admin Redis).
`LmstfyPool` and `LmstfyAdmin` write that state with plain synchronous redis-py, each writer
issuing the same Redis commands, in the same order, as the lmstfy code named in its docstring
(bitleak/lmstfy; docs/LMSTFY_LAYOUT.md gives every fact with its citation), and read it back
with lmstfy's own decoding, so a test can check what lmstfy-py left behind.

The writers mirror lmstfy; they do not copy it. Where lmstfy does several round trips (publish,
consume), so do they: a test can stop between two of them to build a half-done state.
Timestamps are parameters (`now`, unix seconds) so a test decides what is due.

Not lmstfy 1.0.10: `publish(..., versioned=True)` writes the JSON envelope lmstfy added in July
2024 (bitleak/lmstfy PR #225/#226, after 1.0.10), for tests that want a later lmstfy's data too.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import redis

__all__ = [
    "DEFAULT_POOL",
    "KEY_TEMPLATES",
    "TIMER_SET",
    "Limit",
    "LmstfyAdmin",
    "LmstfyPool",
    "Pusher",
    "ReadyElement",
    "Reserved",
    "StoredJob",
    "TimerMember",
    "dead_key",
    "decode_job_data",
    "elapsed_ms",
    "encode_job_data",
    "every_state",
    "go_json",
    "job_id_delay_s",
    "job_id_time_ms",
    "job_id_version",
    "job_key",
    "new_job_id",
    "new_ulid",
    "pack_ready",
    "pack_timer_member",
    "queues_key",
    "ready_key",
    "template_regex",
    "token_key",
    "unpack_ready",
    "unpack_timer_member",
]

# engine/redis/constant.go: the prefixes, joined with "/" by utils.go join().
POOL_PREFIX, QUEUE_PREFIX, DEADLETTER_PREFIX, META_PREFIX = "j", "q", "d", "m"
# engine/redis/engine.go NewEngine: NewTimer("timer_set", ...): one zset per pool (data Redis).
TIMER_SET = "timer_set"
# engine/redis/constant.go BATCH_SIZE / BatchSize: the pump moves at most this many per call.
PUMP_BATCH = 100
# config/config.go DefaultPoolName; server/handlers/middleware.go parseToken falls back to it.
DEFAULT_POOL = "default"
# auth/token.go TokenPrefix.
TOKEN_PREFIX = "tk"
# throttler/throttler.go throttlerRedisKey, buildCounterKey's "l/" prefix.
THROTTLER_KEY = "__throttler_keys__"
# push/meta.go redisMetasKey, redisMetasVersionKey, metaKeyPrefix.
PUSH_METAS, PUSH_METAS_VERSION, PUSH_META_PREFIX = "__push_metas__", "__push_metas_version__", "pm"

# Every key lmstfy writes, as docs/LMSTFY_LAYOUT.md spells it, with its Redis type. A test checks
# that the keys a full scenario leaves are exactly these, and that the doc lists the same.
KEY_TEMPLATES: dict[str, str] = {
    "j/{ns}/{queue}/{id}": "string",
    "q/{ns}/{queue}": "list",
    "d/{ns}/{queue}": "list",
    "timer_set": "zset",
    "m/ns": "hash",
    "m/ns/{ns}": "hash",
    "tk/{pool}/{ns}": "hash",
    "__throttler_keys__": "hash",
    "l/{pool}/{ns}/{token}/{rw}": "string",
    "__push_metas__": "hash",
    "__push_metas_version__": "string",
}
# What each placeholder of a template may stand for: names are [-_A-Za-z0-9]+
# (server/handlers/middleware.go paramRegex), tokens and ids ULID-like, `rw` one letter.
_PLACEHOLDERS = {"ns": "[-_0-9A-Za-z]+", "queue": "[-_0-9A-Za-z]+", "pool": "[-_0-9A-Za-z]+",
                 "id": "[0-9A-Z]{26,27}", "token": "[0-9A-Za-z]+", "rw": "[rw]"}  # fmt: skip


def template_regex(template: str) -> re.Pattern[str]:
    """The regex a concrete key of `template` ("q/{ns}/{queue}") matches in full."""
    parts = re.split(r"\{(\w+)\}", template)
    pattern = "".join(re.escape(part) if i % 2 == 0 else _PLACEHOLDERS[part] for i, part in enumerate(parts))
    return re.compile(pattern)


# --- keys --------------------------------------------------------------------------------------


def _join(*parts: str) -> str:
    return "/".join(parts)


def job_key(ns: str, queue: str, job_id: str) -> str:
    """engine/redis/pool.go PoolJobKey: j/{ns}/{queue}/{id}, a string."""
    return _join(POOL_PREFIX, ns, queue, job_id)


def ready_key(ns: str, queue: str) -> str:
    """engine/redis/queue.go QueueName.String: q/{ns}/{queue}, a list."""
    return _join(QUEUE_PREFIX, ns, queue)


def dead_key(ns: str, queue: str) -> str:
    """engine/redis/deadletter.go DeadLetter.Name: d/{ns}/{queue}, a list."""
    return _join(DEADLETTER_PREFIX, ns, queue)


NAMESPACES_KEY = _join(META_PREFIX, "ns")  # engine/redis/meta.go: hash ns -> "1"


def queues_key(ns: str) -> str:
    """engine/redis/meta.go: m/ns/{ns}, a hash queue -> "1"."""
    return _join(META_PREFIX, "ns", ns)


def token_key(pool: str, ns: str) -> str:
    """auth/token.go tokenKey: tk/{pool}/{ns}, the default pool spelled "default"."""
    return _join(TOKEN_PREFIX, pool or DEFAULT_POOL, ns)


def limit_field(pool: str, ns: str, token: str) -> str:
    """throttler/throttler.go buildLimitKey: the field of __throttler_keys__."""
    return _join(pool, ns, token)


def throttle_counter_key(pool: str, ns: str, token: str, read: bool) -> str:
    """throttler/throttler.go buildCounterKey: l/{pool}/{ns}/{token}/r|w."""
    return _join("l", limit_field(pool, ns, token), "r" if read else "w")


def push_meta_field(pool: str, ns: str, group: str) -> str:
    """push/meta.go buildKey: the field of __push_metas__."""
    return _join(PUSH_META_PREFIX, pool, ns, group)


# --- job ids -----------------------------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_LEN = 26  # oklog/ulid EncodedSize


def _ulid_encode(raw: bytes) -> str:
    value = int.from_bytes(raw, "big")
    chars = []
    for _ in range(_ULID_LEN):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def _ulid_decode(text: str) -> bytes:
    value = 0
    for char in text.upper():
        value = (value << 5) | _CROCKFORD.index(char)
    return value.to_bytes(16, "big")


def new_job_id(delay_s: int, version: int = 0, now_ms: int | None = None, entropy: bytes | None = None) -> str:
    """A job id as uuid/uuid.go GenUniqueJobIDWithDelay (1.0.10) / GenJobIDWithVersion (later) makes it.

    A ULID (48-bit big-endian unix ms, then 80 random bits) whose last 4 bytes are replaced by
    the delay in seconds, little-endian; version 0 (all of 1.0.10's ids) has no prefix, a later
    lmstfy prefixes "1" to ids whose data is the JSON envelope.
    """
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    random_part = os.urandom(6) if entropy is None else entropy
    raw = ms.to_bytes(6, "big") + random_part + struct.pack("<I", delay_s)
    ulid = _ulid_encode(raw)
    return ulid if version == 0 else f"{version}{ulid}"


def new_ulid(now_ms: int | None = None) -> str:
    """uuid/uuid.go GenUniqueID: a plain ULID, all 80 bits after the time random (tokens)."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return _ulid_encode(ms.to_bytes(6, "big") + os.urandom(10))


def _ulid_part(job_id: str) -> str:
    # uuid.go extractJobID: a 27-char id is a version digit and a ULID.
    return job_id[1:] if len(job_id) == _ULID_LEN + 1 else job_id


def job_id_version(job_id: str) -> int:
    """uuid.go ExtractJobIDVersion: 0 for a 26-char id, else its first digit."""
    return 0 if len(job_id) == _ULID_LEN else int(job_id[0])


def job_id_time_ms(job_id: str) -> int:
    return int.from_bytes(_ulid_decode(_ulid_part(job_id))[:6], "big")


def job_id_delay_s(job_id: str) -> int:
    """uuid.go ExtractDelaySecondFromUniqueID: the id's last 4 bytes, little-endian."""
    return int(struct.unpack("<I", _ulid_decode(_ulid_part(job_id))[12:])[0])


def elapsed_ms(job_id: str, now_ms: int) -> int:
    """uuid.go ElapsedMilliSecondFromUniqueID as engine/job.go ElapsedMS uses it: 0 for a future id."""
    return max(0, now_ms - job_id_time_ms(job_id))


# --- element and member packing ----------------------------------------------------------------


@dataclass(frozen=True)
class ReadyElement:
    """One element of a ready list or dead letter: lua struct "HHc0"."""

    tries: int
    job_id: str


@dataclass(frozen=True)
class TimerMember:
    """One member of timer_set: lua struct "Hc0Hc0HHc0"."""

    ns: str
    queue: str
    tries: int
    job_id: str


def pack_ready(tries: int, job_id: str) -> bytes:
    """engine/redis/queue.go structPack: tries u16, len(id) u16, id; little-endian."""
    raw = job_id.encode()
    return struct.pack("<HH", tries, len(raw)) + raw


def unpack_ready(data: bytes) -> ReadyElement:
    """engine/redis/queue.go structUnpack: the id is the rest, and must be as long as said."""
    tries, length = struct.unpack_from("<HH", data)
    job_id = data[4:]
    if len(job_id) != length:
        raise ValueError("corrupted data")  # structUnpack's own error
    return ReadyElement(tries, job_id.decode())


def pack_timer_member(ns: str, queue: str, tries: int, job_id: str) -> bytes:
    """engine/redis/timer.go Timer.Add: len(ns), ns, len(queue), queue, tries, len(id), id."""
    ns_raw, queue_raw, id_raw = ns.encode(), queue.encode(), job_id.encode()
    return b"".join(
        (
            struct.pack("<H", len(ns_raw)) + ns_raw,
            struct.pack("<H", len(queue_raw)) + queue_raw,
            struct.pack("<HH", tries, len(id_raw)) + id_raw,
        )
    )


def unpack_timer_member(data: bytes) -> TimerMember:
    """As the pump's struct.unpack("Hc0Hc0HHc0", v) in engine/redis/timer.go reads a member."""
    (ns_len,) = struct.unpack_from("<H", data, 0)
    ns = data[2 : 2 + ns_len]
    at = 2 + ns_len
    (queue_len,) = struct.unpack_from("<H", data, at)
    queue = data[at + 2 : at + 2 + queue_len]
    at += 2 + queue_len
    tries, id_len = struct.unpack_from("<HH", data, at)
    job_id = data[at + 4 : at + 4 + id_len]
    if at + 4 + id_len != len(data) or len(job_id) != id_len:
        raise ValueError("corrupted timer member")
    return TimerMember(ns.decode(), queue.decode(), tries, job_id.decode())


# --- job data ----------------------------------------------------------------------------------


def go_json(value: object) -> str:
    """JSON as Go's encoding/json writes it: compact, map keys sorted, <>& escaped, UTF-8 raw."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def encode_job_data(job_id: str, body: bytes, attributes: Mapping[str, str] | None = None) -> bytes:
    """The value of j/... : the body itself for a version-0 id (every id of 1.0.10).

    For a versioned id, a later lmstfy's engine/redis/pool.go (PR #225, July 2024) stores
    json.Marshal(JobPayload{Body, Attributes}): {"body":"<std base64>","attributes":{...}}, the
    attributes left out when empty (omitempty).
    """
    if job_id_version(job_id) == 0:
        return body
    # Go marshals a struct's fields in declaration order (body, attributes), not sorted.
    parts = [f'"body":{go_json(base64.b64encode(body).decode())}']
    if attributes:
        parts.append(f'"attributes":{go_json(dict(attributes))}')
    return ("{" + ",".join(parts) + "}").encode()


def decode_job_data(job_id: str, raw: bytes) -> tuple[bytes, dict[str, str] | None]:
    """engine/redis/pool.go Pool.Get: (body, attributes); a version-0 value is the body."""
    if job_id_version(job_id) == 0:
        return raw, None
    payload = json.loads(raw)
    body = payload.get("body")
    return (base64.b64decode(body) if body else b""), payload.get("attributes")


# --- a data pool -------------------------------------------------------------------------------

# lmstfy's timer pump as one Lua script, as docs/LMSTFY_LAYOUT.md section 3 ("Timer") describes it.
# KEYS: the timer zset and the ready, job data and dead-letter prefixes; ARGV: now (s), batch size.
_PUMP_SCRIPT = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'LIMIT', 0, ARGV[2])
if #due == 0 then
    return 0
end
for _, member in ipairs(due) do
    local ns, queue, tries, id = struct.unpack('<Hc0Hc0HHc0', member)
    local data = KEYS[3] .. '/' .. ns .. '/' .. queue .. '/' .. id
    if redis.call('EXISTS', data) == 1 then
        if tries == 0 then
            redis.call('PERSIST', data)
            redis.call('LPUSH', KEYS[4] .. '/' .. ns .. '/' .. queue, struct.pack('<HHc0', 1, #id, id))
        else
            redis.call('LPUSH', KEYS[2] .. '/' .. ns .. '/' .. queue, struct.pack('<HHc0', tries, #id, id))
        end
    end
end
redis.call('ZREM', KEYS[1], unpack(due))
return #due
"""


@dataclass(frozen=True)
class StoredJob:
    body: bytes
    attributes: dict[str, str] | None
    ttl: int  # Redis TTL: -1 for none (lmstfy reports 0), else seconds left


@dataclass(frozen=True)
class Reserved:
    """What engine/redis/engine.go consumeMulti hands back: remaining tries already decreased."""

    ns: str
    queue: str
    job_id: str
    body: bytes
    ttl: int  # seconds, 0 when the job never expires (Pool.Get)
    remaining_tries: int


class LmstfyPool:
    """One lmstfy data pool (engine/redis, a pool whose config sets no `Version`) on `client`."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    # writers

    def register(self, ns: str, queue: str) -> None:
        """engine/redis/meta.go MetaManager.RecordIfNotExist (its in-memory cache aside)."""
        self.client.hset(NAMESPACES_KEY, ns, 1)
        self.client.hset(queues_key(ns), queue, 1)

    def put_job(self, ns: str, queue: str, job_id: str, data: bytes, ttl: int) -> None:
        """engine/redis/pool.go Pool.Add: SET NX with the ttl in seconds, none for ttl 0."""
        if not self.client.set(job_key(ns, queue, job_id), data, ex=ttl or None, nx=True):
            raise ValueError("key existed")  # Pool.Add's own error

    def publish(
        self,
        ns: str,
        queue: str,
        body: bytes,
        *,
        ttl: int = 86400,
        delay: int = 0,
        tries: int = 1,
        attributes: Mapping[str, str] | None = None,
        versioned: bool = False,
        now: float | None = None,
    ) -> str:
        """engine/redis/engine.go Engine.Publish after server/handlers/queue.go Publish made the id.

        Three round trips, as lmstfy: registry, job data, then the ready list (delay 0) or the
        timer (due at now + delay, whole seconds). Defaults are config/config.go's.
        """
        if tries == 0:
            raise ValueError("invalid job: tries cannot be zero")
        stamp = time.time() if now is None else now
        job_id = new_job_id(delay, version=1 if versioned else 0, now_ms=int(stamp * 1000))
        self.register(ns, queue)
        self.put_job(ns, queue, job_id, encode_job_data(job_id, body, attributes if versioned else None), ttl)
        if delay == 0:
            self.client.lpush(ready_key(ns, queue), pack_ready(tries, job_id))  # queue.go Queue.Push
        else:
            self.add_timer(ns, queue, job_id, tries, int(stamp) + delay)
        return job_id

    def add_timer(self, ns: str, queue: str, job_id: str, tries: int, due_s: int) -> None:
        """engine/redis/timer.go Timer.Add: ZADD timer_set, score = due unix seconds."""
        self.client.zadd(TIMER_SET, {pack_timer_member(ns, queue, tries, job_id): due_s})

    def reserve(
        self, ns: str, queues: Sequence[str], ttr: int, now: float | None = None, frozen: bool = False
    ) -> Reserved | None:
        """A non-blocking consume: engine/redis/queue.go PollQueues, then Pool.Get.

        RPOP the first non-empty ready list (in the order given), put the job on the timer with
        one try less (`frozen`: unchanged, as a pusher's PollWithFrozenTries does), due at
        now + ttr, then read its data. A job whose data is gone yields None and leaves its timer
        member behind, as lmstfy's consume with timeout 0 does.
        """
        stamp = int(time.time() if now is None else now)
        popped = next(((q, raw) for q in queues if (raw := self.client.rpop(ready_key(ns, q))) is not None), None)
        if popped is None:
            return None
        queue, raw = popped
        element = unpack_ready(raw)
        if element.tries == 0:
            raise ValueError(f"Job {element.job_id} with tries == 0 appeared")
        remaining = element.tries if frozen else element.tries - 1
        self.add_timer(ns, queue, element.job_id, remaining, stamp + ttr)
        stored = self.job(ns, queue, element.job_id)
        if stored is None:
            return None
        return Reserved(ns, queue, element.job_id, stored.body, max(stored.ttl, 0), remaining)

    def ack(self, ns: str, queue: str, job_id: str) -> None:
        """engine/redis/engine.go Engine.Delete: the job data only; elements left find nothing."""
        self.client.delete(job_key(ns, queue, job_id))

    def pump(self, now_s: int) -> int:
        """One call of engine/redis/timer.go's pump script (LUA_T_PUMP / luaPumpQueueScript).

        Members due by `now_s`, at most PUMP_BATCH: a member whose job data is gone is dropped;
        tries 0 makes the job dead (its data PERSISTed, "HHc0"(1, id) LPUSHed on d/...); else
        "HHc0"(tries, id) is LPUSHed on q/... . All of them leave the timer. One script, as
        lmstfy's: atomic, so it may run beside lmstfy-py's own pump of lmstfy's timer (a rolling
        switch) and each member is moved by one of them only.
        """
        keys = [TIMER_SET, QUEUE_PREFIX, POOL_PREFIX, DEADLETTER_PREFIX]
        return int(self.client.eval(_PUMP_SCRIPT, len(keys), *keys, now_s, PUMP_BATCH))

    def bury(self, ns: str, queue: str, job_id: str) -> None:
        """engine/redis/deadletter.go DeadLetter.Add: what the pump does to a job out of tries."""
        self.client.persist(job_key(ns, queue, job_id))
        self.client.lpush(dead_key(ns, queue), pack_ready(1, job_id))

    def respawn(self, ns: str, queue: str, limit: int = 1, ttl: int = 86400) -> int:
        """engine/redis/deadletter.go DeadLetter.Respawn: RPOPLPUSH d/ -> q/, then EXPIRE ttl if > 0."""
        moved = 0
        for _ in range(limit):
            raw = self.client.rpoplpush(dead_key(ns, queue), ready_key(ns, queue))
            if raw is None:
                break
            moved += 1
            if ttl > 0:
                self.client.expire(job_key(ns, queue, unpack_ready(raw).job_id), ttl)
        return moved

    def delete_dead(self, ns: str, queue: str, limit: int = 1) -> int:
        """engine/redis/deadletter.go DeadLetter.Delete: RPOP the oldest, DEL its data."""
        deleted = 0
        for _ in range(limit):
            raw = self.client.rpop(dead_key(ns, queue))
            if raw is None:
                break
            deleted += 1
            self.client.delete(job_key(ns, queue, unpack_ready(raw).job_id))
        return deleted

    # readers

    def ready(self, ns: str, queue: str) -> list[ReadyElement]:
        """The ready list oldest first: lmstfy LPUSHes new elements and RPOPs (consumes) the tail."""
        return [unpack_ready(raw) for raw in reversed(self.client.lrange(ready_key(ns, queue), 0, -1))]

    def dead(self, ns: str, queue: str) -> list[ReadyElement]:
        """The dead letter oldest first (its tail is the head PeekDeadLetter shows)."""
        return [unpack_ready(raw) for raw in reversed(self.client.lrange(dead_key(ns, queue), 0, -1))]

    def timer(self) -> list[tuple[TimerMember, int]]:
        """Every timer member with its due unix second, earliest first."""
        members = self.client.zrange(TIMER_SET, 0, -1, withscores=True)
        return [(unpack_timer_member(raw), int(score)) for raw, score in members]

    def job(self, ns: str, queue: str, job_id: str) -> StoredJob | None:
        """engine/redis/pool.go Pool.Get: GET and TTL in one pipeline."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(job_key(ns, queue, job_id))
        pipe.ttl(job_key(ns, queue, job_id))
        raw, ttl = pipe.execute()
        if raw is None:
            return None
        body, attributes = decode_job_data(job_id, raw)
        return StoredJob(body, attributes, int(ttl))

    def namespaces(self) -> list[str]:
        return sorted(k.decode() for k in self.client.hkeys(NAMESPACES_KEY))

    def queues(self, ns: str) -> list[str]:
        return sorted(k.decode() for k in self.client.hkeys(queues_key(ns)))


def every_state(pool: LmstfyPool, admin: LmstfyAdmin, now: int) -> dict[str, str]:
    """One job in each state lmstfy leaves, plus the registry and one of each admin record.

    Returns the job ids by state: "ready" (tries 2), "delayed" (due at now + 30), "reserved"
    (3 tries, one delivery under way until now + 30, so 2 left on the timer) and "dead", in
    namespace "ns" except the dead one ("other"/"dead"); a token of "ns" (description "desc"),
    a limit and a used read counter for token TOKEN1, and a pusher "group" of queue "ready".
    """
    ids = {
        "ready": pool.publish("ns", "ready", b"r", ttl=60, tries=2, now=now),
        "delayed": pool.publish("ns", "delayed", b"d", ttl=60, delay=30, now=now),
        "reserved": pool.publish("ns", "reserved", b"x", ttl=60, tries=3, now=now),
        "dead": pool.publish("other", "dead", b"z", ttl=60, now=now),
    }
    if pool.reserve("ns", ["reserved"], ttr=30, now=now) is None:
        raise RuntimeError("the job just published could not be reserved")
    pool.bury("other", "dead", ids["dead"])
    admin.create_token("ns", "desc")
    admin.set_limit("ns", "TOKEN1", Limit(1, 1, 1))
    admin.take("ns", "TOKEN1", read=True, interval=60)
    admin.create_pusher("ns", "group", Pusher(("ready",), "http://h/", 1, 1))
    return ids


# --- the admin Redis ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    """throttler/throttler.go Limiter: units per interval seconds; 0 means unlimited that way."""

    read: int
    write: int
    interval: int


@dataclass(frozen=True)
class Pusher:
    """push/meta.go Meta: the queues of a push group, where and how they are pushed."""

    queues: tuple[str, ...]
    endpoint: str
    workers: int
    timeout: int


class LmstfyAdmin:
    """lmstfy's admin Redis (config `AdminRedis`): tokens, throttle limits, pusher configs."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def create_token(self, ns: str, description: str, pool: str = "", token: str | None = None) -> str:
        """auth/token.go TokenManager.New: HSETNX tk/{pool}/{ns} token description.

        The token is a fresh ULID (uuid.GenUniqueID) unless given; what lmstfy hands the user
        is "{pool}:{token}" for a pool other than the default one.
        """
        made = new_ulid() if token is None else token
        if not self.client.hsetnx(token_key(pool, ns), made, description):
            raise ValueError("the token has already existed")
        return made if pool in ("", DEFAULT_POOL) else f"{pool}:{made}"

    def tokens(self, ns: str, pool: str = "") -> dict[str, str]:
        found = self.client.hgetall(token_key(pool, ns))
        return {k.decode(): v.decode() for k, v in found.items()}

    def set_limit(self, ns: str, token: str, limit: Limit, pool: str = DEFAULT_POOL) -> None:
        """throttler/throttler.go Throttler.Set: HSET __throttler_keys__ {pool}/{ns}/{token} JSON."""
        # Go writes a struct's fields in declaration order (read, write, interval), not sorted.
        value = f'{{"read":{limit.read},"write":{limit.write},"interval":{limit.interval}}}'
        self.client.hset(THROTTLER_KEY, limit_field(pool, ns, token), value)

    def limits(self) -> dict[tuple[str, str, str], Limit]:
        """throttler/throttler.go updateLimiters: every limit, keyed (pool, ns, token)."""
        table = {}
        for field, raw in self.client.hgetall(THROTTLER_KEY).items():
            pool, ns, token = field.decode().split("/")
            found = json.loads(raw)
            table[(pool, ns, token)] = Limit(found["read"], found["write"], found["interval"])
        return table

    def take(self, ns: str, token: str, read: bool, interval: int, pool: str = DEFAULT_POOL) -> int:
        """throttler/throttler.go's incr script: INCR the counter, EXPIRE interval on its first unit."""
        key = throttle_counter_key(pool, ns, token, read)
        taken = int(self.client.incr(key))
        if taken == 1:
            self.client.expire(key, interval)
        return taken

    def create_pusher(self, ns: str, group: str, pusher: Pusher, pool: str = DEFAULT_POOL) -> None:
        """push/meta.go MetaManager.Create: HSETNX __push_metas__ pm/{pool}/{ns}/{group}, INCR version."""
        value = (
            f'{{"queues":{go_json(list(pusher.queues))},"endpoint":{go_json(pusher.endpoint)},'
            f'"workers":{pusher.workers},"timeout":{pusher.timeout}}}'
        )
        if not self.client.hsetnx(PUSH_METAS, push_meta_field(pool, ns, group), value):
            raise ValueError("the meta key has already exists")  # push/meta.go ErrMetaKeyExists
        self.client.incr(PUSH_METAS_VERSION)

    def pushers(self) -> dict[tuple[str, str, str], Pusher]:
        table = {}
        for field, raw in self.client.hgetall(PUSH_METAS).items():
            prefix, pool, ns, group = field.decode().split("/")
            if prefix != PUSH_META_PREFIX:
                continue
            found = json.loads(raw)
            queues = tuple(found.get("queues") or [group])  # before groups, the field named the queue
            table[(pool, ns, group)] = Pusher(queues, found["endpoint"], found["workers"], found["timeout"])
        return table
