"""Push groups (GET /ui/pushers, SPEC section 8): a pool's groups by namespace; create one, edit one,
delete one (after a confirmation). Through the PusherStore, as the admin API's /pusher routes.

The form is checked by the API's own code (pusher_from), so an error reads as the API's 400. The
secret is write-only: the page never holds it; on edit an empty secret field keeps the current
one, and "stop signing" removes it (the API's PUT with "secret": ""). Unlike lmstfy's PUT, where a
field left zero keeps its value, an edit saves the whole form as shown: clearing max_attempts
clears it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.admin.pushers import pusher_from
from lmstfy_py.errors import Conflict, InvalidParameter, LmstfyError, NotFound
from lmstfy_py.web import params
from lmstfy_py.web.admin import readonly
from lmstfy_py.web.dashboard import render

PUSHERS = "/ui/pushers"
NAV = render.NavItem("Pushers", PUSHERS)
# What a refused form shows again as typed; never "secret": the page does not hold it.
FORM_FIELDS = (
    "namespace",
    "group",
    "queues",
    "endpoint",
    "workers",
    "timeout",
    "backoff",
    "backoff_ms",
    "backoff_max_ms",
    "max_attempts",
)
FORM_ERRORS = (InvalidParameter, Conflict, NotFound)  # shown above the form, which keeps what was typed
_INTEGER = re.compile(r"-?[0-9]+")


def _names(fields: dict[str, str]) -> tuple[str, str]:
    """The namespace and group, checked as the /pusher/{ns}/{group} routes check them."""
    ns, group = fields.get("namespace", "").strip(), fields.get("group", "").strip()
    params.check_namespace(ns, too_long="the namespace name was too long")
    params.check_names(ns, group)
    return ns, group


def _number(raw: str) -> int | str | None:
    """A number field as the API's JSON would carry it: absent when empty, else what was typed
    (pusher_from then says "... should be an integer" of what is not one)."""
    raw = raw.strip()
    if not raw:
        return None
    return int(raw) if _INTEGER.fullmatch(raw) else raw


def _body(fields: dict[str, str], editing: bool) -> dict[str, Any]:
    """The form as the JSON body of POST (create) or PUT (edit) /pusher/{ns}/{group}."""
    found: dict[str, Any] = {
        "queues": [queue for queue in re.split(r"[\s,]+", fields.get("queues", "")) if queue],
        "endpoint": fields.get("endpoint", "").strip(),
    }
    for name in ("workers", "timeout", "max_attempts"):
        found[name] = _number(fields.get(name, ""))
    if fields.get("backoff") == "exponential":
        found.update(backoff="exponential")
        found.update(backoff_ms=_number(fields.get("backoff_ms", "")))
        found.update(backoff_max_ms=_number(fields.get("backoff_max_ms", "")))
    if fields.get("secret"):
        found["secret"] = fields["secret"]
    elif editing and fields.get("stop_signing") == "yes":
        found["secret"] = ""
    return found


def _form_of(ns: str, group: str, shown: dict[str, Any]) -> dict[str, str]:
    """A group's fields as the edit form shows them, from readonly.shown_pusher's (its secret only
    as "signed"; to a read-only account, the endpoint without its credentials)."""
    return {
        "namespace": ns,
        "group": group,
        "queues": ", ".join(shown["queues"]),
        "endpoint": shown["endpoint"],
        "workers": str(shown["workers"]),
        "timeout": str(shown["timeout"]),
        "backoff": shown.get("backoff", "fixed"),
        "backoff_ms": str(shown.get("backoff_ms", "")),
        "backoff_max_ms": str(shown.get("backoff_max_ms", "")),
        "max_attempts": str(shown.get("max_attempts", "")),
    }


async def _render(request: Request, form: dict[str, str], editing: bool, signed: bool = False, **more: Any) -> Response:
    runtime, pool = render.runtime_of(request), render.pool_of(request)
    found = await runtime.pushers.all()
    groups = sorted(
        (ns, group, readonly.shown_pusher(request.scope, pusher))
        for (p, ns, group), pusher in found.items()
        if p == pool
    )
    namespaces: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for ns, group, shown in groups:
        namespaces.setdefault(ns, []).append((group, shown))
    status = more.pop("status", 200)
    context = {"namespaces": namespaces, "form": form, "editing": editing, "signed": signed, **more}
    return await render.page(request, "pushers.html", context, status=status)


async def show_pushers(request: Request) -> Response:
    """The list, and the create form; with ?ns=&group= the edit form of that group."""
    ns, group = request.query_params.get("ns"), request.query_params.get("group")
    if not (ns and group):
        return await _render(request, {"backoff": "fixed"}, editing=False)
    params.check_names(ns, group)
    pusher = await render.runtime_of(request).pushers.get(render.pool_of(request), ns, group)
    if pusher is None:
        raise NotFound("pusher was not found")
    form = _form_of(ns, group, readonly.shown_pusher(request.scope, pusher))
    return await _render(request, form, editing=True, signed=pusher.secret is not None)


async def _refused(request: Request, fields: dict[str, str], editing: bool, error: LmstfyError) -> Response:
    """The form again, as typed (but the secret), under the error the API would have answered."""
    form = {name: fields.get(name, "") for name in FORM_FIELDS}
    context: dict[str, Any] = {"error": error.message, "secret_dropped": bool(fields.get("secret"))}
    context.update(no_refresh=True, status=error.status)  # this URL is the action's: nothing to refresh
    return await _render(request, form, editing, fields.get("signed") == "yes", **context)


async def create(request: Request) -> Response:
    """As POST /pusher/{ns}/{group}."""
    runtime, pool, fields = await render.posted(request)
    try:
        ns, group = _names(fields)
        await runtime.pushers.create(pool, ns, group, pusher_from(_body(fields, editing=False)))
    except FORM_ERRORS as error:
        return await _refused(request, fields, False, error)
    return render.back_to(PUSHERS, pool, "pusher_created")


async def edit(request: Request) -> Response:
    """The whole group as the form shows it; the secret kept unless a new one is typed or signing stopped."""
    runtime, pool, fields = await render.posted(request)
    try:
        ns, group = _names(fields)
        current = await runtime.pushers.get(pool, ns, group)
        if current is None:
            raise NotFound("the pusher was not found")
        body = _body(fields, editing=True)
        pusher = pusher_from(body)
        if "secret" not in body:
            pusher = dataclasses.replace(pusher, secret=current.secret)
        await runtime.pushers.replace(pool, ns, group, pusher)
    except FORM_ERRORS as error:
        return await _refused(request, fields, True, error)
    return render.back_to(PUSHERS, pool, "pusher_saved")


async def delete(request: Request) -> Response:
    """As DELETE /pusher/{ns}/{group}, once confirmed."""
    runtime, pool, fields = await render.posted(request)
    ns, group = _names(fields)
    if not render.confirmed(fields):
        details = "Every server process stops pushing its queues within a second; their jobs stay in the queues."
        what = f"Delete push group {group} of {ns}?"
        return await render.confirm(request, what, details, {"namespace": ns, "group": group})
    await runtime.pushers.delete(pool, ns, group)
    return render.back_to(PUSHERS, pool, "pusher_deleted")


ROUTES = render.page_routes(PUSHERS, show_pushers, {"create": create, "edit": edit, "delete": delete})
