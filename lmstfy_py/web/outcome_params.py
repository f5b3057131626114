"""The parameters of a queue's settings route (SPEC 13's keep and events, SPEC 14's flow limits) and of
a result's wait, parsed in one place for the data routes and their admin twins (publish's `keep` and
`group` are publish's options: web/params.py)."""

from __future__ import annotations

import re
from collections.abc import Collection
from decimal import Decimal

from starlette.datastructures import QueryParams

from lmstfy_py.config import UINT16_MAX, UINT32_MAX
from lmstfy_py.errors import InvalidParameter
from lmstfy_py.types import SettingsChange
from lmstfy_py.web import params

SETTINGS = ("keep", "events", "max_reserved", "rate", "burst", "group_concurrency")
MAX_RATE = Decimal(1_000_000)  # jobs a second
MAX_BURST = 1_000_000
UNSET_BURST = 0  # what SettingsChange.burst says for `burst=` with no value: back to max(1, ceil(rate))

# Digits with an optional fraction of up to 6 digits: no sign, exponent, or bare "." at either end.
_RATE = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,6})?")


def settings_change(query: QueryParams, also_allowed: Collection[str]) -> SettingsChange:
    """A PUT's settings, checked whole before anything is changed: unknown names first, then each value
    in the order of SETTINGS. `also_allowed`: the route's own parameters that are no setting (the token,
    the admin's pool)."""
    for name in query:
        if name not in SETTINGS and name not in also_allowed:
            raise InvalidParameter(f"unknown setting: {name}")
    change = SettingsChange(
        keep_s=params.keep(query),
        events=_optional_uint(query, "events", params.MAX_EVENTS),
        max_reserved=_optional_uint(query, "max_reserved", UINT32_MAX),
        rate=_rate(query),
        burst=_burst(query),
        group_concurrency=_optional_uint(query, "group_concurrency", UINT16_MAX, minimum=1),
    )
    if change == SettingsChange():  # every one None: not given
        raise InvalidParameter("no setting given")
    return change


def _optional_uint(query: QueryParams, name: str, maximum: int, minimum: int = 0) -> int | None:
    return None if name not in query else params.uint(query, name, 0, maximum, minimum)


def _rate(query: QueryParams) -> str | None:
    """`rate=R`, jobs a second (0 = off), kept as the text given: the store reads it as a number."""
    text = params._first(query, "rate")
    if text is not None and not (_RATE.fullmatch(text) and Decimal(text) <= MAX_RATE):
        raise InvalidParameter("invalid rate")
    return text


def _burst(query: QueryParams) -> int | None:
    """`burst=B` (1..1000000); `burst=` with no value unsets it."""
    if params._first(query, "burst") == "":
        return UNSET_BURST
    return _optional_uint(query, "burst", MAX_BURST, minimum=1)


def result_wait_ms(query: QueryParams) -> int:
    """`wait=S` (0..600, default 0): how long a result may wait for its job's end."""
    return params.uint(query, "wait", 0, params.MAX_RESULT_WAIT_S) * 1000
