"""A push endpoint as tenants and the dashboard's job pages see it: without its credentials.

An endpoint may carry secrets in its user-info (`http://user:password@host/`) or its query
(`?apikey=...`): they are the admin's, kept as entered in the group's configuration (GET
/pusher/...), but a delivery's failure is written into the job's `last_error`, which every
holder of the namespace's token reads. So the texts made from an endpoint show `***` in their
place, and texts stored before this was so are shown the same way when they are read.
"""

from __future__ import annotations

from urllib.parse import urlsplit

HIDDEN = "***"
REASON_PREFIX = "push to "  # group.py's failure texts: "push to <endpoint>: <outcome>"


def endpoint(url: str) -> str:
    """`url` without user-info, query and fragment (each present one shown as ***)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not parsed: nothing of it can be told apart from a secret
        return HIDDEN
    _, at, host = parts.netloc.rpartition("@")
    shown = f"{parts.scheme}://{HIDDEN}@{host}" if at else f"{parts.scheme}://{host}"
    shown += parts.path
    if parts.query or url.endswith("?"):
        shown += f"?{HIDDEN}"
    return shown


def reason(text: str) -> str:
    """A job's last_error as shown: a push failure's endpoint without its credentials (texts
    written before they were left out, too); any other text as it is."""
    if not text.startswith(REASON_PREFIX):
        return text
    # The outcome ("HTTP 503", "timeout", ...) holds no ": "; the endpoint may (in its query).
    url, sep, outcome = text[len(REASON_PREFIX) :].rpartition(": ")
    if not sep:
        return text
    return f"{REASON_PREFIX}{endpoint(url)}: {outcome}"


def optional_reason(text: str | None) -> str | None:
    return None if text is None else reason(text)
