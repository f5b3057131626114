"""The dashboard's own stylesheet and script (GET /ui/static/{name}), read from the package once.

Pages link them as `/ui/static/NAME?v=HASH` (the content's hash), so a browser may keep them for
good and still gets the new file the first time a page of a new version links it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.web.dashboard.render import not_found
from lmstfy_py.web.middleware import route

TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@dataclass(frozen=True, slots=True)
class Asset:
    content: bytes
    media_type: str
    version: str


def _load() -> dict[str, Asset]:
    found = {}
    for entry in (resources.files("lmstfy_py.web.dashboard") / "static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if suffix in TYPES:
            content = entry.read_bytes()
            found[entry.name] = Asset(content, TYPES[suffix], hashlib.sha256(content).hexdigest()[:12])
    return found


ASSETS = _load()


def url(name: str) -> str:
    return f"/ui/static/{name}?v={ASSETS[name].version}"


async def asset(request: Request) -> Response:
    found = ASSETS.get(request.path_params["name"])
    if found is None:
        return await not_found(request)
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}
    return Response(found.content, media_type=found.media_type, headers=headers)


ROUTES = [route("/ui/static/{name}", "GET", asset)]
