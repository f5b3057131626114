"""What the Engine makes of the job steps' replies (store/contracts/jobs.py): Jobs, JobInfos, errors."""

from __future__ import annotations

from typing import Any

from lmstfy_py import ids
from lmstfy_py.errors import Conflict, NotFound
from lmstfy_py.store.contracts.jobs import Counts, JobState, NextJob, Outcome, Reserved
from lmstfy_py.store.engine_base import as_int, as_text, ttl_seconds
from lmstfy_py.store.jobdata import decode_data
from lmstfy_py.types import Job, JobInfo, JobStateName

_STATES: dict[bytes, JobStateName] = {
    b"T": "delayed",
    b"R": "ready",
    b"X": "reserved",
    b"D": "dead",
    b"C": "completed",
    b"E": "expired",
    b"L": "deleted",
}


def created_ms(job_id: str, stored: Any) -> int | None:
    """When a job was created: its field c, else (a job the engine gave its id keeps none) its id's time."""
    if stored is not None:
        return int(stored)
    return ids.timestamp_ms(job_id) if ids.is_valid(job_id) else None


def reserved_job(ns: str, r: Reserved) -> Job:
    body, attributes, trace = decode_data(r.data)
    queue, job_id = r.queue.decode(), r.job_id.decode()
    created = created_ms(job_id, r.created)
    return Job(ns, queue, job_id, body, ttl_seconds(r.pttl), r.tries, attributes, r.attempts, created, trace)


def ready_job(ns: str, queue: str, j: NextJob) -> JobInfo:
    body, attributes, trace = decode_data(j.data)
    job_id = j.job_id.decode()
    attempts, created = as_int(j.attempts) or 0, created_ms(job_id, j.created)
    job = Job(ns, queue, job_id, body, ttl_seconds(j.pttl), j.tries, attributes, attempts, created, trace)
    return JobInfo(job, "ready", None, as_int(j.priority) or 0, as_text(j.error))


def job_info(ns: str, queue: str, job_id: str, f: JobState) -> JobInfo:
    body, attributes, trace = decode_data(f.data)
    attempts, created = as_int(f.attempts) or 0, created_ms(job_id, f.created)
    job = Job(ns, queue, job_id, body, ttl_seconds(f.pttl), f.tries, attributes, attempts, created, trace)
    state = _STATES.get(f.state, "delayed")
    result = None if f.result is None else bytes(f.result)
    priority, error = as_int(f.priority) or 0, as_text(f.error)
    group = as_text(f.group)
    return JobInfo(job, state, as_int(f.due), priority, error, as_int(f.died), result, as_int(f.finished), group)


def oldest_ready_ms(counts: Counts) -> int | None:
    """Since when the queue's longest-waiting ready job is ready (stats.lua's candidates): a job's field
    y when it became ready after its publish, else when it was created."""
    found = [int(counts.grouped_since)] if counts.grouped_since is not None else []
    for c in counts.candidates:
        since = as_int(c.since)
        found.append(since if since is not None else (created_ms(c.job_id.decode(), c.created) or 0))
    return min(found, default=None)


def checked(outcome: Outcome) -> Outcome:
    """A verb's outcome, or the error its status says."""
    if outcome.status == b"missing":
        raise NotFound("job not found")
    if outcome.status == b"not reserved":
        raise Conflict("job is not reserved")
    if outcome.status == b"not delayed":
        raise Conflict("job is not delayed")
    return outcome
