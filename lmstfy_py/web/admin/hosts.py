"""Refuses a request to the admin port under a host name it does not serve (DNS rebinding).

A page on evil.example can make its name resolve to 127.0.0.1 after it loaded: the visitor's browser
then sends the page's requests to the admin port as same-origin ones (Origin and Host both name
evil.example), reads their answers, and the cross-site check (cross_site.py) has nothing to refuse.
Rebinding needs a name the attacker controls, so the admin port answers only names it knows:
loopback names (`localhost`, `*.localhost`, which browsers resolve to loopback themselves), any IP
literal (which covers the addresses it is bound to, and a probe that asks by the pod's IP), the
admin host it was configured with when that is a name, and the names of `[admin] allowed_hosts`.
Anything else is 421, on every route. A request without Host (HTTP/1.0) cannot have been rebound.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from lmstfy_py.web.errors import MisdirectedHost

# A Host header: a bracketed IPv6 literal or a name (an IPv4 literal being one), then maybe a port.
_HOST = re.compile(r"(\[[^\[\]]*\]|[^:\[\]]*)(?::[0-9]*)?")
SHOWN_CHARS = 100  # of an unknown host in the error: a header may be kilobytes long


def host_name(host: str) -> str | None:
    """The name or address of a Host header without its port and trailing dot, lower-cased; None if malformed."""
    match = _HOST.fullmatch(host.strip())
    return match.group(1).lower().removesuffix(".") if match else None


def _ip_literal(name: str) -> bool:
    try:
        if name.startswith("["):
            ipaddress.IPv6Address(name[1:-1])
        else:
            ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return True


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        """`names`: the host names served besides loopback names and IP literals."""
        self.app = app
        self.names = frozenset(name.lower().removesuffix(".") for name in names)

    def serves(self, host: str, scope: Scope) -> bool:
        name = host_name(host)
        if name is None:
            return False
        if name in ("", "localhost") or name.endswith(".localhost") or name in self.names or _ip_literal(name):
            return True
        # The address the ASGI server says the request came in on: a real server reads it from the socket
        # (an IP literal, passed above); an in-process client names the host it was given.
        server = scope.get("server")
        return server is not None and isinstance(server[0], str) and name == server[0].lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host")
            if host is not None and not self.serves(host, scope):
                shown = host if len(host) <= SHOWN_CHARS else host[:SHOWN_CHARS] + "..."
                raise MisdirectedHost(f"unknown host: {shown}; add it to [admin] allowed_hosts")
        await self.app(scope, receive, send)


def configured_names(admin_host: str, allowed_hosts: Iterable[str]) -> list[str]:
    """The names of `[admin] allowed_hosts`, and the admin host when it is a name (not an address to bind)."""
    names = list(allowed_hosts)
    bare = admin_host.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if bare:
            names.append(bare)
    return names
