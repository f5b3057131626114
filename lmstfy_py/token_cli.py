"""token-cli: every admin route from a shell, as `lmstfy-py token ...` or `scripts/token-cli`.

Talks HTTP with the standard library only, so it adds no dependency and starts fast. Output is
aligned text for people, or with `--json` the server's answer exactly as sent, for machines.
Every failure is one line `token-cli: error: ...` on stderr and exit code 1; bad usage is
click's usage error (exit 2).
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import click

PROG = "token-cli"
DEFAULT_ADMIN = "http://127.0.0.1:7778"
DEFAULT_POOL = "default"
TIMEOUT_S = 30.0
PREVIEW_CHARS = 60
ERROR_FAILED = 1
LIMIT_KEYS = ("read", "write", "interval")


class CliError(click.ClickException):
    """A failure shown as one line with the tool's name, exit code 1."""

    exit_code = ERROR_FAILED

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"{PROG}: error: {self.format_message()}", err=True)


class HttpError(CliError):
    """The server answered 4xx or 5xx."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status} {text}")
        self.status = status


# -- HTTP ------------------------------------------------------------------------------------


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
    return HttpError(exc.code, str(text))


def _reason(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def path(*segments: str) -> str:
    return "/" + "/".join(urllib.parse.quote(segment, safe="") for segment in segments)


def pooled(token: str, pool: str | None) -> str:
    """lmstfy's "pool:token" form: how a token of another pool is named in a path."""
    return f"{pool}:{token}" if pool and pool != DEFAULT_POOL and ":" not in token else token


# -- rendering -------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], empty: str) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    body = [list(row) for row in rows]
    if not body:
        return empty
    cells = [list(headers), *([str(cell) for cell in row] for row in body)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], int) for row in body) for i in range(len(headers))]
    lines = [
        "  ".join(cell.rjust(w) if num else cell.ljust(w) for cell, w, num in zip(row, widths, numeric, strict=True))
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def fields(values: Mapping[str, object]) -> str:
    width = max((len(key) for key in values), default=0)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in values.items())


def preview(data_b64: str) -> str:
    """A job's data for a terminal: the text itself (escaped, cut short) when it is UTF-8."""
    try:
        raw = base64.b64decode(data_b64, validate=True)
    except binascii.Error:
        return "<not base64>"
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return f"<{len(raw)} bytes, binary>"
    shown = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return shown if len(shown) <= PREVIEW_CHARS else shown[: PREVIEW_CHARS - 3] + "..."


def duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    for unit, size, sub_unit, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            return f"{seconds // size}{unit}{(seconds % size) // sub_size}{sub_unit}"
    return f"{ms / 1000:.1f}s"


def attributes(attrs: Mapping[str, str] | None) -> str:
    return ",".join(f"{key}={value}" for key, value in attrs.items()) if attrs else "-"


def count(value: object) -> object:
    """A count the server may send as a number or as the collection itself."""
    return len(value) if isinstance(value, list | dict) else value


def render_info(answer: Mapping[str, list[str]]) -> str:
    rows = [[ns, ", ".join(queues)] for ns, queues in sorted(answer.items())]
    return table(["NAMESPACE", "QUEUES"], rows, empty="no namespaces")


def render_namespaces(answer: Mapping[str, Any]) -> str:
    rows: list[list[object]] = []
    for ns in answer.get("namespaces", []):
        first = [ns["namespace"], count(ns.get("tokens", 0)), ns.get("timer_size", 0)]
        queues = ns.get("queues") or [{"queue": "-", "size": "", "deadletter_size": ""}]
        for i, queue in enumerate(queues):
            lead = first if i == 0 else ["", "", ""]
            rows.append([*lead, queue["queue"], queue["size"], queue["deadletter_size"]])
    headers = ["NAMESPACE", "TOKENS", "TIMER", "QUEUE", "READY", "DEADLETTER"]
    return table(headers, rows, empty=f"no namespaces in pool {answer.get('pool', DEFAULT_POOL)}")


def render_namespace_deleted(answer: Mapping[str, Any]) -> str:
    counts = f"{answer['tokens_deleted']} tokens, {answer['limits_deleted']} limits, {answer['jobs_deleted']} jobs"
    return f"deleted namespace {answer['namespace']}: {counts}"


def render_tokens(answer: Mapping[str, Mapping[str, str]]) -> str:
    return table(["TOKEN", "DESCRIPTION"], sorted(answer["tokens"].items()), empty="no tokens")


def render_limits(answer: Sequence[Mapping[str, Any]]) -> str:
    ordered = sorted(answer, key=lambda item: (item["namespace"], item["token"]))
    rows = [[item["namespace"], item["token"], *(item["limiter"][key] for key in LIMIT_KEYS)] for item in ordered]
    return table(["NAMESPACE", "TOKEN", "READ", "WRITE", "INTERVAL"], rows, empty="no limits")


def render_deadletter(answer: Mapping[str, Any]) -> str:
    head = f"{answer['namespace']}/{answer['queue']}: {answer['deadletter_size']} dead jobs"
    if answer.get("deadletter_head"):
        head += f", oldest {answer['deadletter_head']}"
    rows = [_dead_job_row(job) for job in answer.get("jobs", [])]
    return head + "\n" + table(["JOB_ID", "TTL", "AGE", "ATTRIBUTES", "DATA"], rows, empty="") if rows else head


def _dead_job_row(job: Mapping[str, Any]) -> list[object]:
    ttl = job["ttl"] or "forever"  # lmstfy's ttl 0: the job never expires
    return [job["job_id"], ttl, duration(job["elapsed_ms"]), attributes(job.get("attributes")), preview(job["data"])]


def render_limit(limiter: Mapping[str, Any]) -> str:
    return f"read {limiter['read']}, write {limiter['write']} per {limiter['interval']}s"


# -- the commands ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    client: AdminClient
    as_json: bool

    def show(self, answer: Answer, render: Callable[[Any], str]) -> None:
        """The raw answer with --json, else `render` of its JSON (nothing for an empty answer)."""
        if self.as_json:
            if answer.body:
                click.echo(answer.body.decode(errors="replace").rstrip("\n"))
            return
        text = render(answer.json())
        if text:
            click.echo(text)


def _check_admin_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


pool_option = click.option("--pool", metavar="NAME", help="The pool.  [default: default]")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--admin",
    metavar="URL",
    envvar="LMSTFY_ADMIN",
    default=DEFAULT_ADMIN,
    show_default=True,
    callback=_check_admin_url,
    help="Admin API address (env LMSTFY_ADMIN).",
)
@click.option("--user", envvar="LMSTFY_ADMIN_USER", help="Basic-auth user (env LMSTFY_ADMIN_USER).")
@click.option(
    "--password",
    envvar="LMSTFY_ADMIN_PASSWORD",
    help="Basic-auth password (env LMSTFY_ADMIN_PASSWORD: unlike the flag, not seen by ps).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the server's JSON answer as is.")
@click.pass_context
def token(ctx: click.Context, admin: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Manage tokens, limits, namespaces and dead letters of an lmstfy-py server (its admin API).

    \b
    Examples:
      token-cli create demo --description "billing workers"
      token-cli limit-set demo TOKEN --read 100 --write 50 --interval 10
      token-cli deadletter-peek demo orders
      token-cli --json namespaces | jq .

    Errors are one line on stderr and exit code 1.
    """
    ctx.obj = Cli(AdminClient(admin, user, password), as_json)


@token.command()
@click.pass_obj
def pools(cli: Cli) -> None:
    """List the configured pools."""
    cli.show(cli.client.call("GET", "/pools"), "\n".join)


@token.command()
@pool_option
@click.pass_obj
def info(cli: Cli, pool: str | None) -> None:
    """List namespaces that had jobs, and their queues."""
    cli.show(cli.client.call("GET", "/info", {"pool": pool}), render_info)


@token.command()
@click.pass_obj
def version(cli: Cli) -> None:
    """Show the server's version and build."""
    cli.show(cli.client.call("GET", "/version"), fields)


@token.command()
@pool_option
@click.pass_obj
def namespaces(cli: Cli, pool: str | None) -> None:
    """List namespaces: tokens, timer, queues.

    For each namespace with jobs or tokens: its token count, its timer size (delayed and
    reserved jobs), and per queue the ready and dead jobs.
    """
    cli.show(cli.client.call("GET", "/namespaces", {"pool": pool}), render_namespaces)


@token.command("namespace-delete")
@click.argument("ns")
@pool_option
@click.option("--purge", is_flag=True, help="Also delete every job of the namespace.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def namespace_delete(cli: Cli, ns: str, pool: str | None, purge: bool, yes: bool) -> None:
    """Delete namespace NS (tokens, limits, jobs).

    Deletes its tokens and their limits; with --purge also every job of it. Asks first
    unless --yes.
    """
    what = "tokens, limits and ALL ITS JOBS" if purge else "tokens and limits"
    if not yes:
        # On stderr, so that stdout stays the answer alone (--json).
        click.confirm(f"Delete namespace {ns} of pool {pool or DEFAULT_POOL} with its {what}?", abort=True, err=True)
    answer = cli.client.call("DELETE", path("namespaces", ns), {"pool": pool, "purge": purge})
    cli.show(answer, render_namespace_deleted)


@token.command()
@click.argument("ns")
@click.option("--description", required=True, help="What the token is for.")
@click.option(
    "--token", "user_token", metavar="TOKEN", help="Store this token (20+ characters) instead of a random one."
)
@pool_option
@click.pass_obj
def create(cli: Cli, ns: str, description: str, user_token: str | None, pool: str | None) -> None:
    """Create a token for namespace NS and print it.

    The token is printed alone (prefixed "pool:" for a pool other than default), so a
    script can capture it: TOKEN=$(token-cli create demo --description workers).
    """
    form = {"description": description, **({"token": user_token} if user_token else {})}
    cli.show(cli.client.call("POST", path("token", ns), {"pool": pool}, form=form), lambda got: got["token"])


@token.command("list")
@click.argument("ns")
@pool_option
@click.pass_obj
def list_tokens(cli: Cli, ns: str, pool: str | None) -> None:
    """List the tokens of NS and their descriptions."""
    cli.show(cli.client.call("GET", path("token", ns), {"pool": pool}), render_tokens)


@token.command()
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def delete(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Delete TOKEN of namespace NS (and its limit)."""
    cli.show(cli.client.call("DELETE", path("token", ns, pooled(token, pool))), lambda _: f"deleted token {token}")


def _limit_path(ns: str, token: str, pool: str | None) -> str:
    return path("token", ns, pooled(token, pool), "limit")


@token.command("limit-set")
@click.argument("ns")
@click.argument("token")
@click.option("--read", type=click.IntRange(min=0), required=True, help="Consumes allowed per interval.")
@click.option("--write", type=click.IntRange(min=0), required=True, help="Publishes allowed per interval.")
@click.option("--interval", type=click.IntRange(min=0), required=True, help="The interval, in seconds.")
@pool_option
@click.pass_obj
def limit_set(cli: Cli, ns: str, token: str, read: int, write: int, interval: int, pool: str | None) -> None:
    """Create or update the throttle limit of TOKEN.

    At most --read consumes and --write publishes per --interval seconds. Tries POST
    (create); when the token already has a limit, replaces it with PUT.
    """
    limiter = {"read": read, "write": write, "interval": interval}
    route = _limit_path(ns, token, pool)
    try:
        answer = cli.client.call("POST", route, data=limiter)
    except HttpError as exc:
        # POST refuses an existing limit with 400; only then is PUT the right call (else keep POST's error).
        if exc.status != 400 or not _limit_exists(cli.client, route):
            raise
        answer = cli.client.call("PUT", route, data=limiter)
    verb = "created" if answer.status == 201 else "updated"
    cli.show(answer, lambda _: f"{verb} the limit of {token}: {render_limit(limiter)}")


def _limit_exists(client: AdminClient, route: str) -> bool:
    try:
        client.call("GET", route)
    except HttpError as exc:
        if exc.status == 404:
            return False
        raise
    return True


@token.command("limit-get")
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def limit_get(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Show the throttle limit of TOKEN.

    Exit code 1 (the server's 404) when the token has none.
    """
    cli.show(cli.client.call("GET", _limit_path(ns, token, pool)), render_limit)


@token.command("limit-delete")
@click.argument("ns")
@click.argument("token")
@pool_option
@click.pass_obj
def limit_delete(cli: Cli, ns: str, token: str, pool: str | None) -> None:
    """Remove the throttle limit of TOKEN."""
    answer = cli.client.call("DELETE", _limit_path(ns, token, pool))
    cli.show(answer, lambda _: f"deleted the limit of {token}")


@token.command()
@click.pass_obj
def limits(cli: Cli) -> None:
    """List every throttle limit."""
    cli.show(cli.client.call("GET", "/limits"), render_limits)


@token.command("deadletter-peek")
@click.argument("ns")
@click.argument("queue")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Jobs to show, oldest first.")
@pool_option
@click.pass_obj
def deadletter_peek(cli: Cli, ns: str, queue: str, limit: int, pool: str | None) -> None:
    """Show the oldest dead jobs of NS/QUEUE.

    Shows the dead letter's size and its oldest jobs; a job's data is shown as text when it
    is UTF-8 (escaped, cut at 60 characters), else as its size. --json has the full data.
    """
    answer = cli.client.call("GET", path("deadletter", ns, queue), {"pool": pool, "limit": limit})
    cli.show(answer, render_deadletter)


@token.command("deadletter-respawn")
@click.argument("ns")
@click.argument("queue")
@click.option(
    "--limit", type=click.IntRange(min=1), default=1, show_default=True, help="Jobs to respawn, oldest first."
)
@click.option("--ttl", type=click.IntRange(min=0), default=86400, show_default=True, help="Their new ttl; 0 = forever.")
@pool_option
@click.pass_obj
def deadletter_respawn(cli: Cli, ns: str, queue: str, limit: int, ttl: int, pool: str | None) -> None:
    """Move dead jobs of NS/QUEUE back to ready.

    The oldest --limit dead jobs become ready again, with one try and a ttl of --ttl seconds.
    """
    answer = cli.client.call("PUT", path("deadletter", ns, queue), {"pool": pool, "limit": limit, "ttl": ttl})
    cli.show(answer, lambda got: f"respawned {got['count']} jobs of {ns}/{queue}")


@token.command("deadletter-delete")
@click.argument("ns")
@click.argument("queue")
@click.option("--limit", type=click.IntRange(min=1), default=1, show_default=True, help="Jobs to delete, oldest first.")
@pool_option
@click.pass_obj
def deadletter_delete(cli: Cli, ns: str, queue: str, limit: int, pool: str | None) -> None:
    """Delete dead jobs of NS/QUEUE for good."""
    answer = cli.client.call("DELETE", path("deadletter", ns, queue), {"pool": pool, "limit": limit})
    cli.show(answer, lambda got: f"deleted {got['count']} dead jobs of {ns}/{queue}")


@token.command()
@click.argument("status", required=False, type=click.Choice(["enable", "disable"]))
@click.pass_obj
def accesslog(cli: Cli, status: str | None) -> None:
    """Show or switch the access log.

    With no argument shows its state; `enable` or `disable` switches it on the server
    process that answers (each worker process has its own switch).
    """
    answer = cli.client.call("POST" if status else "GET", "/accesslog", {"status": status})
    cli.show(answer, lambda got: f"access log: {got['status']}")


def main() -> None:
    token(prog_name=PROG)


if __name__ == "__main__":
    main()
