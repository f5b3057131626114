"""A queue's dead letter (GET /ui/deadletter/{ns}/{queue}): its jobs with their reasons, a page at
a time; respawn or delete one, or all of them (after a confirmation)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web.dashboard import display, render

DEAD = "/ui/deadletter/{ns}/{queue}"
PAGE_SIZE = 20
# What the confirmation of "all" asks, and its details ({queue}: ns/queue, {dead}: "N dead jobs").
RESPAWN_ASKED = (
    "Respawn every dead job of {queue}?",
    "Moves the {dead} of {queue} back to ready, each with one try and a fresh ttl.",
)
DELETE_ASKED = (
    "Delete every dead job of {queue}?",
    "Deletes the {dead} of {queue} with their data. This cannot be undone.",
)


def dead_path(ns: str, queue: str) -> str:
    return f"/ui/deadletter/{ns}/{queue}"


async def show_dead(request: Request) -> Response:
    (ns, queue), store = render.queue_of(request), render.store_of(request)
    after = request.query_params.get("after") or None
    dead_page = await store.dead_page(ns, queue, PAGE_SIZE, render.job_id_of(after) if after else None)
    context = {
        "ns": ns,
        "queue": queue,
        "size": await store.dead_letter_size(ns, queue),
        "jobs": [(job, display.data(job.body)) for job in dead_page.jobs],
        "after": after,
        "next": dead_page.next,
    }
    return await render.page(request, "deadletter.html", context)


async def respawn(request: Request) -> Response:
    """One job (field job_id) or, confirmed, all: back to ready with one try and the default ttl, as the
    API does by default."""
    (ns, queue), store = render.queue_of(request), render.store_of(request)
    fields = await render.form_of(request)
    ttl_ms = render.runtime_of(request).config.defaults.ttl * 1000
    one = partial(store.respawn_one, ns, queue, ttl_ms=ttl_ms, tries=1, delay_ms=0)
    every = partial(store.respawn, ns, queue, ttl_ms=ttl_ms)
    return await _one_or_all(request, fields, "respawned", one, every, RESPAWN_ASKED)


async def delete(request: Request) -> Response:
    """One job (field job_id) or, confirmed, all of them, with their data."""
    (ns, queue), store = render.queue_of(request), render.store_of(request)
    fields = await render.form_of(request)
    one, every = partial(store.delete_dead_one, ns, queue), partial(store.delete_dead, ns, queue)
    return await _one_or_all(request, fields, "deleted", one, every, DELETE_ASKED)


async def _one_or_all(
    request: Request,
    fields: dict[str, str],
    done: str,
    one: Callable[[str], Awaitable[object]],
    every: Callable[[int], Awaitable[int]],
    asked: tuple[str, str],
) -> Response:
    """The job the form names, or every dead job once the page `asked` (question, details) is confirmed."""
    (ns, queue), pool = render.queue_of(request), render.pool_of(request)
    if fields.get("job_id"):
        await one(render.job_id_of(fields["job_id"]))
        return render.back_to(dead_path(ns, queue), pool, done, 1)
    size = await render.store_of(request).dead_letter_size(ns, queue)
    if not render.confirmed(fields):
        named = {"dead": display.plural(size, "dead job"), "queue": f"{ns}/{queue}"}
        question, details = (text.format(**named) for text in asked)
        return await render.confirm(request, question, details, {"count": str(size)})
    count = await every(_confirmed_count(fields))
    return render.back_to(dead_path(ns, queue), pool, done, count)


def _confirmed_count(fields: dict[str, str]) -> int:
    """As many as the confirmation named, oldest first: jobs that died since are not touched unseen."""
    raw = fields.get("count", "")
    if not raw.isdigit():
        raise InvalidParameter("invalid count")
    return int(raw)


ROUTES = render.page_routes(DEAD, show_dead, {"respawn": respawn, "delete": delete})
