"""The job ids a request ACKs (beyond lmstfy): a batch ACK's `job_id`, and a consume's `ack`.

Both are checked whole before any is used, so one malformed entry refuses the request and
nothing is ACKed. Both take at most MAX_CONSUME_COUNT ids, what one consume hands out.
"""

from __future__ import annotations

from starlette.datastructures import QueryParams

from lmstfy_py import ids
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import params
from lmstfy_py.web.params import MAX_CONSUME_COUNT

ACK_FORM = "invalid ack: entries are QUEUE:JOB_ID, comma-separated"


def job_ids(query: QueryParams) -> list[str]:
    """The ids of a batch ACK, `job_id=ID1&job_id=ID2,ID3`, repeats dropped.

    Empty entries (a trailing comma) are skipped, as in queue lists.
    """
    given = [job_id for value in query.getlist("job_id") for job_id in value.split(",") if job_id]
    if not given:
        raise InvalidParameter("no job_id given")
    if len(given) > MAX_CONSUME_COUNT:  # what one consume hands out
        raise InvalidParameter(f"more than {MAX_CONSUME_COUNT} job ids")
    if not all(ids.is_acceptable(job_id) for job_id in given):
        raise InvalidParameter("invalid job id")
    return list(dict.fromkeys(given))


def consume_acks(query: QueryParams) -> dict[str, list[str]]:
    """A consume's `ack=QUEUE:ID,QUEUE:ID&ack=...`: the ids to ACK first, by queue, repeats dropped;
    {} without `ack`.

    An entry splits at its first ':' (a queue name has none, a business id may). Unlike the batch
    ACK's list, an empty entry is refused: the worker never sends one, and a consume that goes on
    as if nothing were wrong would hide a client's bug until its jobs came back after their ttr.
    """
    entries = [entry for value in query.getlist("ack") for entry in value.split(",")]
    if len(entries) > MAX_CONSUME_COUNT:
        raise InvalidParameter(f"more than {MAX_CONSUME_COUNT} job ids in ack")
    found: dict[str, dict[str, None]] = {}
    for entry in entries:
        queue, sep, job_id = entry.partition(":")
        if not sep or not queue or not job_id:
            raise InvalidParameter(ACK_FORM)
        if not params.is_queue_name(queue):
            raise InvalidParameter("invalid ack: queue name contains forbidden characters or is too long")
        if not ids.is_acceptable(job_id):
            raise InvalidParameter("invalid ack: invalid job id")
        found.setdefault(queue, {})[job_id] = None
    return {queue: list(job_ids) for queue, job_ids in found.items()}
