"""The admin API over HTTP with the standard library only: no dependency, a fast start."""

from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import click

PROG = "token-cli"
TIMEOUT_S = 30.0
ERROR_FAILED = 1


class CliError(click.ClickException):
    """A failure shown as one line with the tool's name, exit code 1."""

    exit_code = ERROR_FAILED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"{PROG}: error: {self.format_message()}", err=True)


class HttpError(CliError):
    """The server answered 4xx or 5xx."""

    def __init__(self, status: int, text: str, body: bytes = b"") -> None:
        super().__init__(f"{status} {text}")
        self.status = status
        self.body = body  # the answer as sent


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body.strip() else None


@dataclass(frozen=True)
class AdminClient:
    url: str
    user: str | None = None
    password: str | None = None

    def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, object] | None = None,
        *,
        form: Mapping[str, str] | None = None,
        data: Mapping[str, object] | None = None,
    ) -> Answer:
        """One request; `form` goes as a urlencoded form, `data` as JSON; a None query value is left out."""
        request = self._request(method, path, query or {}, form, data)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return Answer(response.status, response.read())
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise CliError(f"cannot reach the admin API at {self.url}: {_reason(exc)}") from None

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, object],
        form: Mapping[str, str] | None,
        data: Mapping[str, object] | None,
    ) -> urllib.request.Request:
        given = {key: _query_value(value) for key, value in query.items() if value is not None}
        url = self.url.rstrip("/") + path + ("?" + urllib.parse.urlencode(given) if given else "")
        request = urllib.request.Request(url, method=method, headers={"Accept": "application/json"})
        if form is not None:
            request.data = urllib.parse.urlencode(form).encode()
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        elif data is not None:
            request.data = json.dumps(data).encode()
            request.add_header("Content-Type", "application/json")
        if self.user is not None:
            # Sent up front: urllib's auth handler would wait for a 401 challenge first.
            pair = f"{self.user}:{self.password or ''}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode())
        return request


def _query_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _http_error(exc: urllib.error.HTTPError) -> HttpError:
    body = exc.read()
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error", parsed.get("msg")), str):
        text = parsed.get("error", parsed.get("msg"))
    else:
        text = " ".join(body.decode(errors="replace").split())[:200] or exc.reason
    return HttpError(exc.code, str(text), body)


def _reason(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
