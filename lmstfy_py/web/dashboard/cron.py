"""Recurring jobs (GET /ui/cron, SPEC section 9): the schedules of every namespace, or of the one
chosen (?ns=), with their next and last runs; create or replace one, delete one (after a
confirmation). Through the JobStore, as the /api/{ns}/{queue}/cron and /cron/{ns} routes; the form
is read by the API's own parser (schedule_from) and stored as the API stores it, so an error (a
400, or the 409 of a full namespace) is shown above the form as the API words it.

The job data is typed as text: sent as UTF-8, with its line ends as "\\n" (a browser sends a text
area's as "\\r\\n"). A schedule whose data is binary is listed, but replacing its data needs the API.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.errors import InvalidParameter
from lmstfy_py.schedules import Schedule, ScheduleState, TooManySchedules
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.web import params
from lmstfy_py.web.dashboard import display, render
from lmstfy_py.web.schedules import check_name, schedule_from

CRON = "/ui/cron"
NAV = render.NavItem("Recurring", CRON)
MAX_SCHEDULES = 500  # rows the every-namespace view reads and shows; choosing a namespace shows all of its own
READ_AT_ONCE = 20  # namespaces whose schedules are read concurrently
Group = tuple[str, list[ScheduleState]]  # a namespace and its schedules
QUERY_FIELDS = ("cron", "every", "tz", "ttl", "tries", "priority", "catchup")  # as PUT .../cron/{name} takes them
FORM_FIELDS = ("namespace", "queue", "name", *QUERY_FIELDS, "data")


async def _namespaces(request: Request) -> list[str]:
    """Namespaces that ever had a job and namespaces that have tokens (a schedule needs one of them)."""
    runtime, pool = render.runtime_of(request), render.pool_of(request)
    return sorted(set(await render.store_of(request).namespaces()) | set(await runtime.tokens.namespaces(pool)))


def _chosen(request: Request) -> str | None:
    """The namespace asked for (?ns=); None: every namespace."""
    ns = request.query_params.get("ns")
    if ns:
        params.check_namespace(ns)
        return ns
    return None


async def _every_schedule(store: JobStore, namespaces: list[str]) -> tuple[list[Group], bool]:
    """The schedules of every namespace holding any, by namespace, at most MAX_SCHEDULES; whether
    some may be left out. READ_AT_ONCE namespaces are read at a time: most hold none."""
    groups: list[Group] = []
    room = MAX_SCHEDULES
    for at in range(0, len(namespaces), READ_AT_ONCE):
        batch = namespaces[at : at + READ_AT_ONCE]
        for ns, states in zip(batch, await asyncio.gather(*(store.schedules(ns) for ns in batch)), strict=True):
            if not states:
                continue
            if len(states) > room:
                if room:
                    groups.append((ns, states[:room]))
                return groups, True
            groups.append((ns, states))
            room -= len(states)
    return groups, False


async def _render(request: Request, ns: str | None, form: dict[str, str], **more: Any) -> Response:
    """One namespace's schedules (`ns`, or ?ns=), or, when none is chosen, those of every namespace:
    the page a newcomer opens shows every schedule there is, not an empty first namespace."""
    namespaces, store = await _namespaces(request), render.store_of(request)
    ns = ns or _chosen(request)
    if ns and ns not in namespaces:
        namespaces.append(ns)
    if ns:
        groups, cut = [(ns, await store.schedules(ns))], False
    else:
        groups, cut = await _every_schedule(store, namespaces)
    status = more.pop("status", 200)
    # The form's namespace: the one shown, or the only one there is.
    default_ns = ns or (namespaces[0] if len(namespaces) == 1 else "")
    context: dict[str, Any] = {"namespaces": namespaces, "ns": ns, "groups": groups, "cut": cut}
    context.update(max_schedules=MAX_SCHEDULES, form={"namespace": default_ns, **form})
    return await render.page(request, "cron.html", {**context, **more}, status=status)


def _form_of(schedule: Schedule) -> tuple[dict[str, str], bool]:
    """A schedule's fields as the form shows them; whether its data is binary (not in the form)."""
    text = display.text_of(schedule.body)
    form = {
        "queue": schedule.queue,
        "name": schedule.name,
        "cron": schedule.cron or "",
        "every": "" if schedule.every_s is None else str(schedule.every_s),
        "tz": schedule.tz,
        "ttl": str(schedule.ttl_ms // 1000),
        "tries": str(schedule.tries),
        "priority": str(schedule.priority),
        "catchup": schedule.catchup,
        "data": text or "",
    }
    return form, text is None


async def show_cron(request: Request) -> Response:
    """The namespace's schedules and the form; with ?queue=&name= the form holds that schedule."""
    queue, name = request.query_params.get("queue"), request.query_params.get("name")
    if not (queue and name):
        return await _render(request, None, {"catchup": "one"})
    ns = request.query_params.get("ns", "")
    params.check_names(ns, queue)
    state = await render.store_of(request).schedule(ns, queue, check_name(name))
    form, binary = _form_of(state.schedule)
    return await _render(request, ns, form, binary_data=binary)


def _schedule(request: Request, fields: dict[str, str]) -> tuple[str, Schedule]:
    """The form read as PUT /api/{ns}/{queue}/cron/{name}?... reads its path, query and body."""
    ns, queue = fields.get("namespace", "").strip(), fields.get("queue", "").strip()
    params.check_names(ns, queue)
    name = check_name(fields.get("name", "").strip())
    # An empty field is a parameter not given: the API's default.
    query = QueryParams([(key, fields[key].strip()) for key in QUERY_FIELDS if fields.get(key, "").strip()])
    body = fields.get("data", "").replace("\r\n", "\n").encode()
    return ns, schedule_from(queue, name, query, body, render.runtime_of(request).config)


async def save(request: Request) -> Response:
    """Creates the schedule, or replaces the one of that queue and name (its next run counted from now)."""
    pool = render.pool_of(request)
    fields = await render.form_of(request)
    try:
        ns, schedule = _schedule(request, fields)
        cap = render.runtime_of(request).config.server.max_schedules_per_namespace
        created, _ = await render.store_of(request).put_schedule(ns, schedule, cap)
    except (InvalidParameter, TooManySchedules) as error:  # the form again, with what to change
        form = {name: fields.get(name, "") for name in FORM_FIELDS}
        # This URL is the action's: nothing to refresh.
        return await _render(request, None, form, error=error.message, status=error.status, no_refresh=True)
    return render.back_to(CRON, pool, "schedule_created" if created else "schedule_replaced", ns=ns)


async def delete(request: Request) -> Response:
    """As DELETE /cron/{ns}/{queue}/{name}, once confirmed."""
    pool = render.pool_of(request)
    fields = await render.form_of(request)
    ns, queue = fields.get("namespace", ""), fields.get("queue", "")
    params.check_names(ns, queue)
    name = check_name(fields.get("name", ""))
    if not render.confirmed(fields):
        details = "It publishes no more jobs; the jobs it published stay in the queue."
        what = f"Delete the schedule {name} of {ns}/{queue}?"
        return await render.confirm(request, what, details, {"namespace": ns, "queue": queue, "name": name})
    await render.store_of(request).delete_schedule(ns, queue, name)
    return render.back_to(CRON, pool, "schedule_deleted", ns=ns)


ROUTES = render.page_routes(CRON, show_cron, {"save": save, "delete": delete})
