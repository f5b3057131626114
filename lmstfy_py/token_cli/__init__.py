"""token-cli: every admin route from a shell, as `lmstfy-py token ...` or `scripts/token-cli`.

Talks HTTP with the standard library only, so it adds no dependency and starts fast. Output is
aligned text for people, or with `--json` the server's answer exactly as sent, for machines.
Every failure is one line `token-cli: error: ...` on stderr and exit code 1; bad usage is
click's usage error (exit 2).

app.py holds the command group; client.py the HTTP; render.py the text; each other module the
commands of one concern, registered on the group when imported here.
"""

from lmstfy_py.token_cli import deadletters, outcomes, pushers, schedules, server, tokens
from lmstfy_py.token_cli.app import token
from lmstfy_py.token_cli.client import PROG

__all__ = ["deadletters", "main", "outcomes", "pushers", "schedules", "server", "token", "tokens"]


def main() -> None:
    token(prog_name=PROG)
