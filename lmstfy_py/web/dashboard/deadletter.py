"""A queue's dead letter (GET /ui/deadletter/{ns}/{queue}): its jobs with their reasons, a page at
a time; respawn or delete one, or all of them (after a confirmation)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py import ids
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web.dashboard import display
from lmstfy_py.web.dashboard.render import (
    back_to,
    confirm,
    confirmed,
    form_of,
    page,
    pool_of,
    queue_of,
    runtime_of,
    store_of,
    ui,
)
from lmstfy_py.web.middleware import route

DEAD = "/ui/deadletter/{ns}/{queue}"
PAGE_SIZE = 20


def dead_path(ns: str, queue: str) -> str:
    return f"/ui/deadletter/{ns}/{queue}"


def _job_id(raw: str) -> str:
    if not ids.is_acceptable(raw):
        raise InvalidParameter("invalid job id")
    return raw


async def show_dead(request: Request) -> Response:
    (ns, queue), store = queue_of(request), store_of(request)
    after = request.query_params.get("after") or None
    dead_page = await store.dead_page(ns, queue, PAGE_SIZE, _job_id(after) if after else None)
    context = {
        "ns": ns,
        "queue": queue,
        "size": await store.dead_letter_size(ns, queue),
        "jobs": [(job, display.data(job.body)) for job in dead_page.jobs],
        "after": after,
        "next": dead_page.next,
    }
    return await page(request, "deadletter.html", context)


async def respawn(request: Request) -> Response:
    """One job (field job_id) or, confirmed, all: back to ready with one try and the default ttl, as the
    API does by default."""
    (ns, queue), pool, store = queue_of(request), pool_of(request), store_of(request)
    fields = await form_of(request)
    ttl_ms = runtime_of(request).config.defaults.ttl * 1000
    if fields.get("job_id"):
        await store.respawn_one(ns, queue, _job_id(fields["job_id"]), ttl_ms, tries=1, delay_ms=0)
        return back_to(dead_path(ns, queue), pool, "respawned", 1)
    size = await store.dead_letter_size(ns, queue)
    if not confirmed(fields):
        dead = display.plural(size, "dead job")
        details = f"Moves the {dead} of {ns}/{queue} back to ready, each with one try and a fresh ttl."
        return await confirm(request, f"Respawn every dead job of {ns}/{queue}?", details, {"count": str(size)})
    count = await store.respawn(ns, queue, _confirmed_count(fields), ttl_ms)
    return back_to(dead_path(ns, queue), pool, "respawned", count)


async def delete(request: Request) -> Response:
    """One job (field job_id) or, confirmed, all of them, with their data."""
    (ns, queue), pool, store = queue_of(request), pool_of(request), store_of(request)
    fields = await form_of(request)
    if fields.get("job_id"):
        await store.delete_dead_one(ns, queue, _job_id(fields["job_id"]))
        return back_to(dead_path(ns, queue), pool, "deleted", 1)
    size = await store.dead_letter_size(ns, queue)
    if not confirmed(fields):
        dead = display.plural(size, "dead job")
        details = f"Deletes the {dead} of {ns}/{queue} with their data. This cannot be undone."
        return await confirm(request, f"Delete every dead job of {ns}/{queue}?", details, {"count": str(size)})
    count = await store.delete_dead(ns, queue, _confirmed_count(fields))
    return back_to(dead_path(ns, queue), pool, "deleted", count)


def _confirmed_count(fields: dict[str, str]) -> int:
    """As many as the confirmation named, oldest first: jobs that died since are not touched unseen."""
    raw = fields.get("count", "")
    if not raw.isdigit():
        raise InvalidParameter("invalid count")
    return int(raw)


ROUTES = [
    route(DEAD, "GET", ui(show_dead)),
    route(DEAD + "/respawn", "POST", ui(respawn)),
    route(DEAD + "/delete", "POST", ui(delete)),
]
