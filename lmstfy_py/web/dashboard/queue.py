"""A queue (GET /ui/queue/{ns}/{queue}): its counts and rates, its flow-control limits, groups in
flight and delay horizon (SPEC 14), its next jobs, a job looked up by id; pause, resume and destroy
(after a confirmation), promote a delayed job."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.errors import NotFound
from lmstfy_py.types import JobInfo
from lmstfy_py.web.dashboard import charts, display, render

QUEUE = "/ui/queue/{ns}/{queue}"
NEXT_SHOWN = 10  # next jobs listed


def queue_path(ns: str, queue: str) -> str:
    return f"/ui/queue/{ns}/{queue}"


async def _looked_up(request: Request, ns: str, queue: str) -> tuple[str, JobInfo | None]:
    """The job id asked for (?job_id=) and what was found; None when there is no such job."""
    job_id = request.query_params.get("job_id", "").strip()
    if not job_id:
        return "", None
    render.job_id_of(job_id)
    try:
        return job_id, await render.store_of(request).peek_job(ns, queue, job_id)
    except NotFound:
        return job_id, None


async def show_queue(request: Request) -> Response:
    (ns, queue), pool, store = render.queue_of(request), render.pool_of(request), render.store_of(request)
    stats = await store.stats(ns, queue)
    rates = (await render.runtime_of(request).rates.history(pool, only=(ns, queue))).of(ns, queue)
    job_id, info = await _looked_up(request, ns, queue)
    settings = await store.queue_settings(ns, queue)
    next_jobs = await store.next_jobs(ns, queue, NEXT_SHOWN)
    context = {
        "ns": ns,
        "queue": queue,
        "known": await store.queue_exists(ns, queue),
        "stats": stats,
        "rates": rates,
        "chart": charts.rate_chart(rates, "queue-rates"),
        "next_jobs": next_jobs,
        # Ready jobs of groups (SPEC 14) are not in the list next_jobs reads: counted, not listed.
        "unlisted": max(0, stats.ready - len(next_jobs)) if len(next_jobs) < NEXT_SHOWN else 0,
        # The live tail of the queue's events (SPEC 13) when it records them: an EventSource on the admin twin.
        "events_kept": settings.events,
        "limits": display.limits(settings),
        "groups_in_flight": await store.groups_in_flight(ns, queue),
        "due_chart": charts.due_chart(stats.due, "due-chart"),
        "job_id": job_id,
        "info": info,
        "info_data": display.data(info.job.body) if info else None,
        # A completed job's result, shown as its data is (SPEC 13).
        "info_result": display.data(info.result) if info and info.result is not None else None,
    }
    return await render.page(request, "queue.html", context)


async def _set_paused(request: Request, paused: bool) -> Response:
    (ns, queue), pool = render.queue_of(request), render.pool_of(request)
    await render.form_of(request)
    await render.store_of(request).pause(ns, queue, paused)
    return render.back_to(queue_path(ns, queue), pool, "paused" if paused else "resumed")


async def pause(request: Request) -> Response:
    return await _set_paused(request, True)


async def resume(request: Request) -> Response:
    return await _set_paused(request, False)


async def promote(request: Request) -> Response:
    """Makes the looked-up delayed job ready now (PUT .../promote's engine call), then shows it again."""
    (ns, queue), pool = render.queue_of(request), render.pool_of(request)
    job_id = render.job_id_of((await render.form_of(request)).get("job_id", ""))
    await render.store_of(request).promote(ns, queue, job_id)
    return render.back_to(queue_path(ns, queue), pool, "promoted", job_id=job_id)


async def destroy(request: Request) -> Response:
    """Drops every ready job of the queue (DELETE /api/{ns}/{q}'s engine call), once confirmed."""
    (ns, queue), pool, store = render.queue_of(request), render.pool_of(request), render.store_of(request)
    fields = await render.form_of(request)
    if not render.confirmed(fields):
        ready = (await store.stats(ns, queue)).ready
        jobs = display.plural(ready, "ready job")
        details = f"Deletes the {jobs} of {ns}/{queue} with their data. Delayed, reserved and dead jobs stay."
        return await render.confirm(request, f"Destroy queue {ns}/{queue}?", details, {})
    dropped = await store.destroy(ns, queue)
    return render.back_to(queue_path(ns, queue), pool, "destroyed", dropped)


ROUTES = render.page_routes(
    QUEUE, show_queue, {"pause": pause, "resume": resume, "destroy": destroy, "promote": promote}
)
