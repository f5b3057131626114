"""lmstfy's own token-cli invocation (its scripts/token-cli), with lmstfy's output.

    token-cli HOST:PORT --pools                       # GET /pools
    token-cli HOST:PORT -c -n NS -D DESC [-p POOL] [-t TOKEN]   # POST /token/{ns}
    token-cli HOST:PORT -d -n NS -t TOKEN [-p POOL]   # DELETE /token/{ns}/{token}
    token-cli HOST:PORT -l -n NS [-p POOL]            # GET /token/{ns}

Recognised by its first argument (anything that is not one of our commands or options, see
app.py) and parsed by argparse with lmstfy's definition, so its long options, abbreviations and
bundled flags work as there. Output as lmstfy's script prints it: the server's answer, with the
JSON of a successful answer laid out as lmstfy's server sends it (Go's indented JSON), "ok" for
a deletion; the checks of missing parameters print lmstfy's sentence and exit 1; an answered
request exits 0 whatever its status, as lmstfy's does (its answer says what went wrong).

Beyond lmstfy's script: basic auth from LMSTFY_ADMIN_USER / LMSTFY_ADMIN_PASSWORD, an address
with http:// or https:// kept as given, a server it cannot reach is one `token-cli: error:`
line (exit 1) rather than a traceback, and `-d -p POOL -t TOKEN` deletes the token of that pool
(lmstfy's script sends the pool as a query parameter its server ignores, and deletes the
token of the default pool).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from lmstfy_py.token_cli.client import PROG, AdminClient, Answer, CliError, HttpError
from lmstfy_py.token_cli.render import path, pooled

EXAMPLES = """examples:
    token-cli 127.0.0.1:7778 --pools                                    # list pools
    token-cli 127.0.0.1:7778 -c -p pool -n namespace -D description     # create new namespace
    token-cli 127.0.0.1:7778 -d -p pool -n namespace -t token           # delete the token
    token-cli 127.0.0.1:7778 -l -p pool -n namespace                    # list tokens in namespace
"""
# lmstfy's options: what makes an invocation lmstfy's when it comes first (app.py).
OPTIONS = frozenset(
    {"-D", "--description", "-p", "--pool", "-n", "--namespace", "-t", "--token"}
    | {"-c", "--create", "-d", "--delete", "-l", "--list", "-P", "--pools"}
)


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog=PROG,
        description="Manage the namespace and tokens (lmstfy's token-cli)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    found.add_argument("server", type=str, help="the server address(host:port)")
    found.add_argument("-D", "--description", type=str, help="the description")
    found.add_argument("-p", "--pool", type=str, help="the name of pool")
    found.add_argument("-n", "--namespace", type=str, help="the name of namespace")
    found.add_argument("-t", "--token", type=str, help="the token to create or delete")
    found.add_argument("-c", "--create", action="store_true", help="create a token of the namespace")
    found.add_argument("-d", "--delete", action="store_true", help="delete the token of the namespace")
    found.add_argument("-l", "--list", action="store_true", help="list tokens")
    found.add_argument("-P", "--pools", action="store_true", help="list pools")
    return found


def go_indented_json(value: Any) -> str:
    """JSON as Go's json.MarshalIndent(v, "", "    ") writes it (gin's IndentedJSON): map keys sorted,
    <, > and & escaped."""
    text = json.dumps(value, indent=4, sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def main(args: Sequence[str]) -> NoReturn:
    """Runs lmstfy's invocation `args` and exits with its code."""
    options = parser().parse_args(args)
    try:
        sys.exit(_run(options))
    except CliError as exc:
        exc.show()
        sys.exit(exc.exit_code)


def _run(options: argparse.Namespace) -> int:
    server = options.server if "://" in options.server else "http://" + options.server
    client = AdminClient(server, os.environ.get("LMSTFY_ADMIN_USER"), os.environ.get("LMSTFY_ADMIN_PASSWORD"))
    if options.pools:
        return _show(client, "GET", "/pools")
    missing = _missing(options)
    if missing:
        print(missing)
        return 1
    pool = None if options.pool in (None, "", "default") else options.pool
    if options.list:
        return _show(client, "GET", path("token", options.namespace), {"pool": pool})
    if options.create:
        form = {"description": options.description, **({"token": options.token} if options.token else {})}
        return _show(client, "POST", path("token", options.namespace), {"pool": pool}, form)
    if options.delete:
        return _show(client, "DELETE", path("token", options.namespace, pooled(options.token, pool)))
    print("aha, I'm do nothing.")  # lmstfy's words when no action is given
    return 0


def _missing(options: argparse.Namespace) -> str | None:
    """lmstfy's sentence for a missing parameter, checked in its order."""
    if options.namespace is None:
        return "param 'namespace' is missing, please use -n to assign the namespace"
    if options.create and options.description is None:
        return "param 'description' is missing, please use -D to assign the description"
    if options.delete and options.token is None:
        return "param 'token' is missing, please use -t to assign the token"
    return None


def _show(
    client: AdminClient,
    method: str,
    route: str,
    query: dict[str, object] | None = None,
    form: dict[str, str] | None = None,
) -> int:
    try:
        answer = client.call(method, route, query, form=form)
    except HttpError as exc:
        print(exc.body.decode(errors="replace"))  # lmstfy's script prints any answer as it came
        return 0
    print(_text(answer, method))
    return 0


def _text(answer: Answer, method: str) -> str:
    if method == "DELETE" and answer.status == 204:
        return "ok"
    try:
        return go_indented_json(answer.json())
    except ValueError:
        return answer.body.decode(errors="replace")
