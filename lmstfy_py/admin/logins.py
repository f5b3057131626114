"""Failed admin logins, counted per client address in the admin Redis, so that basic auth cannot be
guessed at thousands of passwords a second.

An address may fail MAX_FAILURES times in a window of WINDOW_MS opened by its first failure; then
every request of it that needs an account, with the right password too, is refused until the window
ends (else the limit would be no limit: the guess that hits would be told so). Other addresses are
never slowed. The count lives in Redis, not in the process: the server's workers share one port, and a
count per process would allow workers x MAX_FAILURES. While Redis does not answer, logins are checked
as before without a limit (the routes behind them answer 503 anyway): the limiter fails open, alone.

An IPv6 client is counted by its /64, which one host usually holds whole; an IPv4 address mapped into
IPv6 (a dual-stack listener) as the IPv4 address it is.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from typing import Any

from lmstfy_py.admin.contracts import LOGIN_FAILURES, CounterKeys, LoginArgs
from lmstfy_py.store import keys
from lmstfy_py.store.faults import outage_reason

log = logging.getLogger(__name__)

MAX_FAILURES = 10
WINDOW_MS = 60_000
# A Redis that hangs must not hold every admin request for its hang timeout: past this, no limit.
TIMEOUT_S = 1.0
UNKNOWN_CLIENT = "-"  # a peer without an address (a unix socket): all such count as one


def client_key(address: str | None) -> str:
    """What failures are counted by: the address, an IPv6 one's /64."""
    if not address:
        return UNKNOWN_CLIENT
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class Logins:
    """The limiter; each method answers the seconds the address must wait when it is over the limit, else None."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis

    async def failed(self, address: str | None) -> int | None:
        """Counts a failed login; the failure past the limit is refused as well."""
        counted = await self._call(address, fail=True)
        if counted is None:
            return None
        failures, left_ms = counted
        if failures == MAX_FAILURES:
            # Once a window: the address is not secret, and an operator wants to know who guesses.
            log.warning("admin basic auth: %d failed logins from %s, refused %ds", failures, address, left_ms // 1000)
        return _retry_after(left_ms) if failures > MAX_FAILURES else None

    async def refused(self, address: str | None) -> int | None:
        """Whether a right login must still wait: its address is over the limit."""
        counted = await self._call(address, fail=False)
        if counted is None:
            return None
        failures, left_ms = counted
        return _retry_after(left_ms) if failures >= MAX_FAILURES else None

    async def _call(self, address: str | None, fail: bool) -> tuple[int, int] | None:
        key = keys.login_failures(client_key(address))
        try:
            async with asyncio.timeout(TIMEOUT_S):
                found = await LOGIN_FAILURES(self.redis, CounterKeys(key), LoginArgs("1" if fail else "0", WINDOW_MS))
        except Exception as exc:
            # TimeoutError: asyncio.timeout's, which outage_reason does not take for redis-py's own.
            if not isinstance(exc, TimeoutError) and outage_reason(exc) is None:
                raise
            # The pool's health check logs the outage itself.
            log.debug("admin login limiter off while redis does not answer: %r", exc)
            return None
        return int(found.failures), int(found.left_ms)


def _retry_after(left_ms: int) -> int:
    return max(1, math.ceil(left_ms / 1000))
