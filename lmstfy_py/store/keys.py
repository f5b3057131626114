"""The only code that spells a Redis key or packs a list/zset element.

Every key of one namespace carries the hash tag ``{ns}`` so that each Lua
script touches a single Redis Cluster slot, and a consumer can block on the
wake lists of several queues of one namespace at once.

| key              | type   | holds                                                        |
|------------------|--------|--------------------------------------------------------------|
| j/{ns}/q/id      | hash   | d: msgpack [body, attributes], past 64 bytes in pieces d, d2,|
|                  |        | ... d8 (up to 512 bytes; a small job's hash stays a listpack:|
|                  |        | lua/_lib.lua's data_fields); s: state (T delayed, R ready, X |
|                  |        | reserved, D dead); t: the tries packed in its element; c:    |
|                  |        | created ms (only for an id the engine did not make: ours     |
|                  |        | tell it); p priority; a attempts; e last error; k died ms;   |
|                  |        | b backoff "base:max"; u unique_for ms; K keep s; g group;    |
|                  |        | h 1 while a grouped job holds its slot on the timer (release |
|                  |        | delay, backoff); y ms since when it is ready, when that is   |
|                  |        | later than its publish (SPEC 14). PEXPIRE = ttl (a grouped   |
|                  |        | job's + 60 s: the pump ends it, freeing its group's slot).   |
|                  |        | An ended job with a keep stays K s (PEXPIRE) as a            |
|                  |        | record: s C completed, E expired, L deleted; f ended ms; r   |
|                  |        | the complete's result. No element points at a record.        |
| r/{ns}/q         | list   | ready elements of priority 0, packed (tries, id); LPUSH in,  |
|                  |        | RPOP out (lmstfy's layout)                                   |
| rp/{ns}/q        | zset   | ready elements of priority > 0; score (256-p)*2^44 + seq     |
| n/{ns}/q         | hash   | T delayed and X reserved counts, seq, paused; gseq: the      |
|                  |        | ring's last turn (while the queue has a ring)                |
| u/{ns}/q/id      | string | tombstone: the id of an ended job stays taken (unique_for)   |
| d/{ns}/q         | list   | dead letter, packed (tries, id); oldest at the tail          |
| t/{ns}           | zset   | timer: packed (ns, q, tries, id) + "X" for a reservation,    |
|                  |        | score = due time in ms; + "E" (tries 0): when a job with a   |
|                  |        | keep and a ttl expires, leaving its record (lua/_lib.lua's   |
|                  |        | set_ttl builds it from the job key; its hash lives ttl+keep) |
|                  |        | + "W" (tries 0, id ""): a queue held back by its rate has its|
|                  |        | next token then (the pump wakes the queue; SPEC 14)          |
| w/{ns}/q         | list   | at most one wake token for long-polling consumers            |
| qs/{ns}          | set    | the queue names ever published to in the namespace           |
| qc/{ns}/q        | hash   | the queue's settings (SPEC 13): keep (s), events; absent = 0;|
|                  |        | SPEC 14: max_reserved, rate (decimal text), burst (absent:   |
|                  |        | unset), group_concurrency (absent: 1); configuration: kept   |
|                  |        | through destroy and a namespace's purge; eseq: the last      |
|                  |        | event's number (ev/{ns}/q's ids count them); bt, bts: the    |
|                  |        | rate's token bucket (tokens, when counted ms; absent: full)  |
| gq/{ns}/q/group  | zset   | a group's ready elements, scored as rp/{ns}/q; a release or  |
|                  |        | ttr puts one ahead of the first (score first - 1)            |
| gr/{ns}/q        | zset   | the ring: groups holding a deliverable job (a ready one and a|
|                  |        | free slot), score = turn; "" = the ungrouped jobs' turn;     |
|                  |        | deleted when no group is left in it                         |
| gs/{ns}/q        | hash   | group -> slots in use (reserved, or held on the timer: h)    |
| gy/{ns}/q        | zset   | grouped ready job id -> ms since when it is ready            |
| dd/{ns}/q        | hash   | due second -> delayed jobs due then (stats' due buckets)     |
| ev/{ns}/q        | stream | the queue's last `events` events, ids "<eseq>-0": k kind, e  |
|                  |        | the JSON sent (lua/_lib.lua's event builds the key from the  |
|                  |        | job's key j/{ns}/q/id; store/events.py reads it)             |
| rw/{ns}/q/id     | string | how many result() waiters wait for the job (store/ends.py);  |
|                  |        | PEXPIRE = the longest wait and a margin; deleted by the end  |
|                  |        | that tells them                                              |
| ended/{ns}       | channel| (pub/sub) a job ended that a waiter waits for: msgpack of    |
|                  |        | ["q/id", job_state.lua's fields] (lua/_lib.lua tell_waiters) |
| nss              | set    | the namespaces of the pool (read by the pump's sweep, /info) |
| due              | zset   | namespace -> earliest due ms of its timer (the pump's index) |

Admin-side keys (tokens, throttle limits and their counters) live in the admin pool's Redis.
"""

from __future__ import annotations

import struct

NAMESPACES = "nss"
DUE_INDEX = "due"


def job(ns: str, queue: str, job_id: str) -> str:
    """Its queue's prefix, job(ns, queue, ""), and the id: the hot steps join the two (engine_base.py)."""
    return f"j/{{{ns}}}/{queue}/{job_id}"


def job_prefix(ns: str) -> str:
    """What Lua prepends to "<queue>/<id>" for jobs it only learns from an element."""
    return f"j/{{{ns}}}/"


def ready(ns: str, queue: str) -> str:
    return f"r/{{{ns}}}/{queue}"


def ready_prefix(ns: str) -> str:
    return f"r/{{{ns}}}/"


def priority(ns: str, queue: str) -> str:
    return f"rp/{{{ns}}}/{queue}"


def priority_prefix(ns: str) -> str:
    return f"rp/{{{ns}}}/"


def meta(ns: str, queue: str) -> str:
    return f"n/{{{ns}}}/{queue}"


def meta_prefix(ns: str) -> str:
    return f"n/{{{ns}}}/"


def tombstone(ns: str, queue: str, job_id: str) -> str:
    """Must be job()'s key with "u" for its first letter (lua/_lib.lua builds it so)."""
    return f"u/{{{ns}}}/{queue}/{job_id}"


def dead(ns: str, queue: str) -> str:
    return f"d/{{{ns}}}/{queue}"


def dead_prefix(ns: str) -> str:
    return f"d/{{{ns}}}/"


def timer(ns: str) -> str:
    return f"t/{{{ns}}}"


def wake(ns: str, queue: str) -> str:
    return f"w/{{{ns}}}/{queue}"


def wake_prefix(ns: str) -> str:
    return f"w/{{{ns}}}/"


def queues(ns: str) -> str:
    return f"qs/{{{ns}}}"


def settings(ns: str, queue: str) -> str:
    """A queue's settings hash (keep, events), read by the publish step itself."""
    return f"qc/{{{ns}}}/{queue}"


def events(ns: str, queue: str) -> str:
    """Must be settings()'s key with "ev" for "qc" (lua/_lib.lua builds both from the job's key)."""
    return f"ev/{{{ns}}}/{queue}"


# Flow control (SPEC 14): a queue's groups and its due seconds. Lua builds each from the queue's
# meta key n/{ns}/q by its first letter(s), as it builds job keys (lua/_lib.lua's flow helpers).


def group_ready(ns: str, queue: str, group: str) -> str:
    """A group's ready elements (zset, scored as the priority set)."""
    return f"gq/{{{ns}}}/{queue}/{group}"


def group_ring(ns: str, queue: str) -> str:
    """The ring of groups holding a deliverable job (zset, score = turn); member "" = the ungrouped jobs' turn."""
    return f"gr/{{{ns}}}/{queue}"


def group_slots(ns: str, queue: str) -> str:
    """Group -> slots in use (hash; a field is deleted at 0)."""
    return f"gs/{{{ns}}}/{queue}"


def group_ready_since(ns: str, queue: str) -> str:
    """Grouped ready job id -> ms since when it is ready (zset; stats' count and oldest)."""
    return f"gy/{{{ns}}}/{queue}"


def due_seconds(ns: str, queue: str) -> str:
    """Due second -> delayed jobs due then (hash; stats' due buckets)."""
    return f"dd/{{{ns}}}/{queue}"


def waiters(ns: str, queue: str, job_id: str) -> str:
    """Must be job()'s key with "rw" for its first letter (lua/_lib.lua builds it so)."""
    return f"rw/{{{ns}}}/{queue}/{job_id}"


def ended_channel(ns: str) -> str:
    """The pub/sub channel of the namespace's ends a waiter waits for (lua/_lib.lua builds it from a job key)."""
    return f"ended/{{{ns}}}"


# Recurring jobs (SPEC section 9). A schedule is named "<queue>/<name>" in its namespace's keys; a
# name, like a queue, has no "/".
CRON_INDEX = "crd"  # zset: namespace -> its earliest next tick (ms); the scheduler reads it


def schedules(ns: str) -> str:
    """Hash: "<queue>/<name>" -> the packed schedule (lmstfy_py/schedules.py)."""
    return f"cs/{{{ns}}}"


def schedule_ticks(ns: str) -> str:
    """Zset: "<queue>/<name>" -> its next tick (ms)."""
    return f"ct/{{{ns}}}"


def schedule_last(ns: str) -> str:
    """Hash: "<queue>/<name>" -> "<ms of its last job> <that job's id>"."""
    return f"cl/{{{ns}}}"


def schedule_field(queue: str, name: str) -> str:
    return f"{queue}/{name}"


# What lmstfy 1.0.10 itself keeps in a data pool's Redis (docs/LMSTFY_LAYOUT.md), served in place
# on an lmstfy-format pool (store/lmstfy_format.py). No hash tags: lmstfy never ran on a cluster.
LMSTFY_TIMER = "timer_set"  # zset: 'Hc0Hc0HHc0' (ns, queue, tries, id) members, scored in unix seconds
LMSTFY_NAMESPACES = "m/ns"  # hash: namespace -> "1"
# In lmstfy's admin Redis: its throttle limits, "pool/ns/token" -> {"read","write","interval"}
# (lmstfy-py's LIMITS hash holds the same fields and JSON). Its tokens are keys.tokens' own hashes.
LMSTFY_LIMITS = "__throttler_keys__"


def lmstfy_queues(ns: str) -> str:
    """Hash: queue -> "1", every queue lmstfy published to in the namespace."""
    return f"m/ns/{ns}"


def lmstfy_job(ns: str, queue: str, job_id: str) -> str:
    """String: the job's data (its body; a JSON envelope for a versioned id), EXPIRE = its ttl."""
    return f"j/{ns}/{queue}/{job_id}"


def lmstfy_ready(ns: str, queue: str) -> str:
    return f"q/{ns}/{queue}"


def lmstfy_dead(ns: str, queue: str) -> str:
    return f"d/{ns}/{queue}"


def tokens(pool: str, ns: str) -> str:
    return f"tk/{pool}/{ns}"


def token_grants(pool: str, ns: str) -> str:
    """Hash: token -> its scopes and queue patterns (admin/grants.py), only for a token that has any;
    beside lmstfy's token hash, which stays token -> description. Hash-tagged with that hash's whole
    name (untagged, it hashes whole): both are in one slot, so one script changes them together."""
    return f"tkg/{{{tokens(pool, ns)}}}"


def token_namespaces(pool: str) -> str:
    return f"tkns/{pool}"


# Throttle limits (admin Redis). The hash and its version counter share the hash tag {limits}: one
# script changes both atomically, also in a Redis Cluster.
LIMITS = "lm/{limits}"  # hash: limit_field(pool, ns, token) -> JSON {"read","write","interval"}
LIMITS_VERSION = "lmv/{limits}"  # string: bumped by every change of LIMITS, polled by every process


# Pusher configurations (admin Redis), where lmstfy keeps them (admin/pushers.py).
PUSH_METAS = "__push_metas__"  # hash: push_meta_field(pool, ns, group) -> pusher JSON
PUSH_METAS_VERSION = "__push_metas_version__"  # string: bumped by every change of PUSH_METAS


def push_meta_field(pool: str, ns: str, group: str) -> str:
    return f"pm/{pool}/{ns}/{group}"


# Run-time switches (admin Redis): a hash {state, version} each (admin/switches.py).
ACCESS_LOG_SWITCH = "sw/accesslog"

# The dashboard's CSRF secret (admin Redis): random bytes, made once by the first process that needs them.
DASHBOARD_SECRET = "ui/secret"


def login_failures(client: str) -> str:
    """A string: the failed admin logins of one client address in the open window, expiring when it ends
    (admin/logins.py), admin Redis. One key per script call; the tag keeps every such key in one slot."""
    return f"lf/{{logins}}/{client}"


def rates(pool: str, minute: int) -> str:
    """A hash of one pool's publish and consume counts in one unix minute (admin/rates.py), admin Redis."""
    return f"rt/{pool}/{minute}"


def rate_field(kind: str, ns: str, queue: str) -> str:
    """kind "p" (published) or "c" (consumed); names hold no '/', so the field splits back."""
    return f"{kind}/{ns}/{queue}"


def limit_field(pool: str, ns: str, token: str) -> str:
    """Pool and namespace names hold no '/', so the first two split the field back unambiguously."""
    return f"{pool}/{ns}/{token}"


def throttle_counter(pool: str, ns: str, token: str, read: bool) -> str:
    """A hash {t: when its window opened (ms), n: units taken}, expiring when the window ends."""
    return f"lc/{pool}/{ns}/{token}/{'r' if read else 'w'}"


def pack_element(tries: int, job_id: str) -> bytes:
    """A ready or dead list element, lmstfy's ``HHc0``: tries, id length, id."""
    raw = job_id.encode()
    return struct.pack("<HH", tries, len(raw)) + raw


def unpack_element(element: bytes) -> tuple[int, str]:
    tries, length = struct.unpack_from("<HH", element)
    return tries, element[4 : 4 + length].decode()


def pack_timer_member(ns: str, queue: str, tries: int, job_id: str, reserved: bool = False) -> bytes:
    """A timer member, lmstfy's ``Hc0Hc0HHc0``: namespace, queue, tries, id; "X" after it for a reservation."""
    ns_raw, q_raw, id_raw = ns.encode(), queue.encode(), job_id.encode()
    return b"".join(
        (
            struct.pack("<H", len(ns_raw)),
            ns_raw,
            struct.pack("<H", len(q_raw)),
            q_raw,
            struct.pack("<HH", tries, len(id_raw)),
            id_raw,
            b"X" if reserved else b"",
        )
    )
