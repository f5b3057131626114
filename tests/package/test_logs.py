"""Log lines in lmstfy's formats (logrus text and JSON): their fields, their quoting, and the request
they were written in (req_id, pool, namespace, queue), read back from a real file."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lmstfy_py.logs import JsonFormatter, LineHandler, PlainFormatter, TextFormatter, go_duration
from lmstfy_py.web.middleware import build_app, route
from tests.conftest import client_for

LOGGER = "lmstfy_py.tests.logs"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0000005, "500ns"),
        (0.000123, "123µs"),
        (0.0015, "1.5ms"),
        (0.0123456789, "12.345679ms"),
        (2.5, "2.5s"),
        (61.5, "1m1.5s"),
        (3723, "1h2m3s"),
    ],
)
def test_latency_reads_as_go_prints_a_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@pytest.fixture
def logged(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """LOGGER's lines, in the format the test names (param), in a file."""
    path = tmp_path / "error.log"
    handler = LineHandler(str(path))
    handler.setFormatter(request.param)
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()


@pytest.mark.parametrize("logged", [TextFormatter(logging.WARNING)], indirect=True)
def test_text_lines_quote_what_could_break_them(logged: Path) -> None:
    log = logging.getLogger(LOGGER)
    log.info("plain", extra={"fields": {"ns": "a b", "n": 3}})
    log.warning('two\nlines "quoted"')
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("failed")
    lines = logged.read_text().splitlines()
    assert len(lines) == 3  # a traceback stays in its line
    assert lines[0].startswith('time="') and lines[0].endswith(' level=info msg=plain n=3 ns="a b"')
    assert ' level=warning msg="two\\nlines \\"quoted\\"" bt_func=' in lines[1]  # -bt warn: its source
    assert " level=error msg=failed " in lines[2] and "err=\"ValueError('bad')\"" in lines[2]
    assert 'stack="Traceback (most recent call last):\\n' in lines[2]


async def _logs_a_warning(request: Request) -> Response:
    request.state.pool = "blue"  # what the data app's authorize notes
    logging.getLogger(LOGGER).warning("inside")
    return JSONResponse({})


@pytest.mark.parametrize("logged", [JsonFormatter(None), PlainFormatter("%(levelname)s %(message)s")], indirect=True)
async def test_lines_written_in_a_request_name_it(logged: Path) -> None:
    app = build_app(None, [route("/api/{ns}/{queue}/x", "GET", _logs_a_warning)])  # type: ignore[arg-type]
    async with client_for(app) as client:
        await client.get("/api/demo/q1/x", headers={"X-Request-ID": "rid-9"})
    logging.getLogger(LOGGER).warning("outside")
    inside, outside = logged.read_text().splitlines()
    named = {"req_id": "rid-9", "pool": "blue", "namespace": "demo", "queue": "q1"}
    if inside.startswith("{"):
        entry = json.loads(inside)
        assert {key: entry[key] for key in named} == named and entry["msg"] == "inside"
        assert entry["level"] == "warning" and set(json.loads(outside)) == {"level", "msg", "time"}
    else:
        assert inside == "WARNING inside req_id=rid-9 pool=blue namespace=demo queue=q1"
        assert outside == "WARNING outside"
