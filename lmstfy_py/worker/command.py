"""`lmstfy-py worker MODULE:CALLABLE ...`: a Worker from the command line.

Only click is imported here, so that `lmstfy-py --help` stays instant; the worker and its
handler's module are imported when the command runs. Exit codes: 0 after a stop (SIGTERM,
SIGINT), 1 when the worker stopped on an error (e.g. 401 invalid token), 2 for bad usage or a
handler that cannot be found.
"""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

import click

RUNTIME_ERROR = 1
USAGE_ERROR = 2


@click.command(context_settings={"show_default": True})  # every default is shown
@click.argument("handler", metavar="MODULE:CALLABLE")
@click.option("--url", envvar="LMSTFY_URL", default="http://127.0.0.1:7777", help="Data API (env LMSTFY_URL).")
@click.option(
    "--token", envvar="LMSTFY_TOKEN", required=True, help="Namespace token (env LMSTFY_TOKEN: keeps it out of ps)."
)
@click.option("--namespace", envvar="LMSTFY_NAMESPACE", required=True, help="Namespace (env LMSTFY_NAMESPACE).")
@click.option("--queue", "queues", required=True, metavar="Q1,Q2", help="Queues to consume, the first listed wins.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, help="Handlers at once.")
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    help=(
        "Jobs held beyond the running ones, waiting for a slot.  [default: what the handlers finish"
        " in two consume round trips, at least the concurrency, at most 1200]"
    ),
)
@click.option(
    "--ttr",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    help="Seconds each job is reserved (touched while its handler runs).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 100),
    help="Most jobs per consume (each asks for at most the free room).  [default: 100]",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    help="Seconds running handlers get at a stop; the rest are released.",
)
@click.option(
    "--poll",
    type=click.IntRange(1, 600),
    default=2,
    help="Long-poll wait in seconds; a stop waits for the long-polls in flight.",
)
@click.option(
    "--ack-with-consume/--no-ack-with-consume",
    default=True,
    help="ACK finished jobs with the next consume (one request per batch); off for an lmstfy-py"
    " from before that (it would ignore them: jobs delivered again after their ttr).",
)
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus metrics on this port.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def worker(
    handler: str,
    url: str,
    token: str,
    namespace: str,
    queues: str,
    concurrency: int,
    prefetch: int | None,
    ttr: float,
    count: int | None,
    grace: float,
    poll: int,
    ack_with_consume: bool,
    metrics_port: int | None,
    log_level: str,
) -> None:
    """Run MODULE:CALLABLE (a function or coroutine function of one job) for every job of the queues.

    MODULE is imported as `python -m` would (the current directory is importable); CALLABLE may be
    dotted (module:obj.method).
    """
    from lmstfy_py.client import LmstfyError
    from lmstfy_py.worker.handlers import HandlerNotFound, load_handler
    from lmstfy_py.worker.runner import Worker

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpcore (the client's transport) logs ~10 DEBUG lines per request: at --log-level debug
    # they would bury the worker's own lines.
    logging.getLogger("httpcore").setLevel(max(logging.INFO, logging.getLogger().level))
    try:
        found = load_handler(handler)
        runner = Worker(
            found,
            url=url,
            token=token,
            namespace=namespace,
            queues=[q.strip() for q in queues.split(",") if q.strip()],
            concurrency=concurrency,
            prefetch=prefetch,
            ttr=ttr,
            count=count,
            grace=grace,
            poll=poll,
            metrics_port=metrics_port,
            ack_with_consume=ack_with_consume,
        )
    except (HandlerNotFound, ValueError) as exc:
        _fail(str(exc), USAGE_ERROR)
    try:
        runner.run()
    except (LmstfyError, OSError) as exc:  # OSError: the metrics port is taken
        _fail(str(exc), RUNTIME_ERROR)


def _fail(message: str, code: int) -> NoReturn:
    print(f"lmstfy-py worker: error: {message}", file=sys.stderr)
    sys.exit(code)
