"""The throttle limit an admin sets (web/admin/limits.py, the dashboard's token page), parsed in one place."""

from __future__ import annotations

import json

from lmstfy_py.admin.limits import Limit
from lmstfy_py.config import UINT32_MAX
from lmstfy_py.errors import InvalidParameter


def limiter(body: bytes) -> Limit:
    """lmstfy's limiter JSON {"read","write","interval"}; an absent or null field is 0, as Go decodes it."""
    try:
        found = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InvalidParameter("the limit should be a JSON object") from exc
    if not isinstance(found, dict):
        raise InvalidParameter("the limit should be a JSON object")
    read, write, interval = (_limit_value(found, name) for name in ("read", "write", "interval"))
    if read == write == 0:
        raise InvalidParameter("the read and write of the limit can't both be 0")
    if interval == 0:
        raise InvalidParameter("interval should be > 0")
    return Limit(read, write, interval)


def _limit_value(found: dict[str, object], name: str) -> int:
    value = found.get(name)
    if value is None:
        return 0
    # bool is an int subclass, and Go refuses true, 1.5 and 1.0 for an integer alike.
    if type(value) is not int or not 0 <= value <= UINT32_MAX:
        raise InvalidParameter(f"invalid {name}: should be an integer from 0 to {UINT32_MAX}")
    return value
