"""The parameters of SPEC 13's routes beyond publish's `keep` (web/params.py): a settings change and a
result's wait, parsed in one place for the data routes and their admin twins."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from starlette.datastructures import QueryParams

from lmstfy_py.errors import InvalidParameter
from lmstfy_py.web import params

SETTINGS = ("keep", "events")


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """The settings a PUT gives; None: left as they are."""

    keep_s: int | None
    events: int | None


def settings_change(query: QueryParams, also_allowed: Collection[str]) -> SettingsChange:
    """A PUT's settings, checked whole before anything is changed. `also_allowed`: the route's own
    parameters that are no setting (the token, the admin's pool)."""
    for name in query:
        if name not in SETTINGS and name not in also_allowed:
            raise InvalidParameter(f"unknown setting: {name}")
    keep_s = params.keep(query)
    events = None if "events" not in query else params.uint(query, "events", 0, params.MAX_EVENTS)
    if keep_s is None and events is None:
        raise InvalidParameter("no setting given")
    return SettingsChange(keep_s, events)


def result_wait_ms(query: QueryParams) -> int:
    """`wait=S` (0..600, default 0): how long a result may wait for its job's end."""
    return params.uint(query, "wait", 0, params.MAX_RESULT_WAIT_S) * 1000
