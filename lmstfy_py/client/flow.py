"""How the client reads a queue's stats, with SPEC 14's delay horizon (lmstfy-py only): since when the
oldest ready job has waited, and the delayed jobs by time left until due."""

from __future__ import annotations

from lmstfy_py.client import calls
from lmstfy_py.client.calls import Answer
from lmstfy_py.client.job import DueBuckets, QueueStats

DUE_KEYS = ("1m", "1h", "1d", "later")  # stats' `due`, in DueBuckets' order


def read_stats(answer: Answer) -> QueueStats:
    f = calls.success(answer)
    # The delay horizon: absent from an older server's answer, read as none.
    oldest, due = f.get("oldest_ready_ms"), f.get("due") or {}
    return QueueStats(
        int(f["ready"]),
        int(f["delayed"]),
        int(f["reserved"]),
        int(f["dead"]),
        bool(f["paused"]),
        None if oldest is None else int(oldest),
        DueBuckets(*(int(due.get(key, 0)) for key in DUE_KEYS)),
    )
