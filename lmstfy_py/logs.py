"""Logging: where the lines go and what they look like (config LogConfig, lmstfy's LogDir/LogFormat).

Two logs, as lmstfy: the access log (logger "lmstfy_py.access", one line per request while the
switch is on, web/accesslog.py) and the rest (every other logger). Without a `dir` the access
log goes to stdout and the rest to stderr; with one, to `access.log` and `error.log` in it,
reopened on SIGUSR1 (after a logrotate, as lmstfy).

Formats:
- "plain", lmstfy-py's own: `2026-01-02 03:04:05,678 WARNING lmstfy_py.store.health: message`,
  then ` req_id=... pool=... namespace=... queue=...` when a request names them; access lines
  `2026-01-02 03:04:05,678 GET /api/ns/q 200 1.8ms request_id=... remote=...`.
- "text", logrus's text formatter as lmstfy writes it: `time="2026-01-02T03:04:05+08:00"
  level=info msg="..." key=value ...`, keys sorted, a value quoted when it holds anything but
  letters, digits and `-._/@^+`.
- "json", logrus's JSON formatter: one object per line, keys sorted.

In "text" and "json" every line is one line (a traceback goes in the `stack` field) and names
`req_id`, `pool`, `namespace` and `queue` where known: the request being handled is kept in a
context variable (`current_request`, set by web/middleware.py). With `backtrack` set (lmstfy's
-bt), lines that severe or worse name their source in `bt_line` and `bt_func`.

Every line is written with one write(2), on a file opened O_APPEND: worker processes sharing a
file or a pipe never interleave parts of lines (a write to a regular file is atomic with
respect to its position; to a pipe, up to PIPE_BUF, 4096 bytes).
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from lmstfy_py.config import LogConfig

ACCESS_LOGGER = "lmstfy_py.access"
# The `extra` key under which web/accesslog.py hands a request's fields to the formatters.
ACCESS_FIELDS = "access_fields"
ACCESS_FILE, ERROR_FILE = "access.log", "error.log"
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PLAIN_ACCESS_FORMAT = "%(asctime)s %(message)s"

# The ASGI scope of the request being handled in this task (web/middleware.py sets it).
current_request: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "current_request", default=None
)

# logrus level name -> Python level.
LEVELS = {
    "panic": logging.CRITICAL,
    "fatal": logging.CRITICAL,
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}
# Python level -> what logrus calls it in a line.
_LOGRUS_NAMES = {logging.CRITICAL: "fatal", logging.ERROR: "error", logging.WARNING: "warning", logging.INFO: "info"}
_BARE = re.compile(r"[-A-Za-z0-9._/@^+]*")


def request_fields() -> dict[str, str]:
    """req_id, pool, namespace and queue of the request being handled, those it names."""
    scope = current_request.get()
    if scope is None:
        return {}
    state, params = scope.get("state", {}), scope.get("path_params", {})
    found = {
        "req_id": state.get("request_id"),
        "pool": state.get("pool"),
        "namespace": params.get("ns"),
        "queue": params.get("queue"),
    }
    return {key: str(value) for key, value in found.items() if value}


# -- formats -----------------------------------------------------------------------------------


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration prints it (logrus's text of lmstfy's `latency`): 1.5ms, 2.1s."""
    ns = round(seconds * 1e9)
    if ns < 1000:
        return f"{ns}ns"
    for unit, size in (("µs", 1000), ("ms", 1_000_000)):
        if ns < size * 1000:
            return _trim(f"{ns / size:.{len(str(size)) - 1}f}") + unit
    if ns < 60 * 10**9:
        return _trim(f"{ns / 1e9:.9f}") + "s"
    minutes, rest = divmod(ns, 60 * 10**9)
    hours, minutes = divmod(minutes, 60)
    head = f"{hours}h{minutes}m" if hours else f"{minutes}m"
    return head + _trim(f"{rest / 1e9:.9f}") + "s"


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


def _rfc3339(created: float) -> str:
    """Go's time.RFC3339 in local time, as logrus stamps its lines (Z for UTC)."""
    text = datetime.datetime.fromtimestamp(created).astimezone().isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _logrus_level(record: logging.LogRecord) -> str:
    return _LOGRUS_NAMES.get(record.levelno, "debug" if record.levelno < logging.INFO else "info")


class _LogrusFormatter(logging.Formatter):
    """A record as a logrus entry: time, level, msg and fields (the base for text and JSON)."""

    def __init__(self, backtrack: int | None) -> None:
        super().__init__()
        self.backtrack = backtrack  # lines at least this severe name their source

    def fields(self, record: logging.LogRecord) -> dict[str, Any]:
        access: dict[str, Any] | None = getattr(record, ACCESS_FIELDS, None)
        if access is not None:
            return {key: value for key, value in access.items() if value is not None}
        found: dict[str, Any] = request_fields()
        found.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[1] is not None:
            found["err"] = repr(record.exc_info[1])
            found["stack"] = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if self.backtrack is not None and record.levelno >= self.backtrack:
            found["bt_line"] = f"{record.pathname}:{record.lineno}"
            found["bt_func"] = f"{record.name}.{record.funcName}"
        return found

    def message(self, record: logging.LogRecord) -> str:
        return "" if hasattr(record, ACCESS_FIELDS) else record.getMessage()


class TextFormatter(_LogrusFormatter):
    """logrus's TextFormatter without a terminal: time, level, msg (if any), then the fields sorted."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"time={_text(_rfc3339(record.created))}", f"level={_logrus_level(record)}"]
        message = self.message(record)
        if message:
            parts.append(f"msg={_text(message)}")
        fields = self.fields(record)
        parts += [f"{key}={_text(_text_value(fields[key]))}" for key in sorted(fields)]
        return " ".join(parts)


def _text_value(value: Any) -> str:
    if isinstance(value, float):
        return go_duration(value)  # the one float field: the access log's latency, in seconds
    return str(value).lower() if isinstance(value, bool) else str(value)


def _text(value: str) -> str:
    # Quoted with escapes (as Go's %q) when it holds anything else: no value can break a line.
    return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)


class JsonFormatter(_LogrusFormatter):
    """logrus's JSONFormatter: the fields with time, level and msg, keys sorted, one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {key: _json_value(value) for key, value in self.fields(record).items()}
        entry.update(time=_rfc3339(record.created), level=_logrus_level(record), msg=self.message(record))
        return json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _json_value(value: Any) -> Any:
    return round(value * 1e9) if isinstance(value, float) else value  # a Go Duration: nanoseconds


class PlainFormatter(logging.Formatter):
    """lmstfy-py's own lines, with the request's fields appended where known."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = request_fields()
        return line + "".join(f" {key}={_text(value)}" for key, value in fields.items()) if fields else line


# -- destinations -------------------------------------------------------------------------------


class LineHandler(logging.Handler):
    """Writes each record as one line with one write(2), to a file (O_APPEND) or an inherited fd."""

    def __init__(self, path: str | None = None, fd: int | None = None) -> None:
        super().__init__()
        self.path = path
        self.fd = _open(path) if path is not None else fd if fd is not None else sys.stderr.fileno()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode(errors="replace")
            while data:  # a regular file takes it whole; only a pipe or an error writes less
                data = data[os.write(self.fd, data) :]
        except Exception:
            self.handleError(record)

    def reopen(self) -> None:
        """Opens the file again by name (logrotate moved it away): lines go to the new one."""
        if self.path is None:
            return
        fresh = _open(self.path)
        self.acquire()
        try:
            old, self.fd = self.fd, fresh
        finally:
            self.release()
        os.close(old)

    def close(self) -> None:
        if self.path is not None and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        super().close()


def _open(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)


class LogSetupError(Exception):
    """The log directory or a file in it cannot be opened: one line for the operator."""


_handlers: list[LineHandler] = []


def setup(config: LogConfig) -> None:
    """Sends the error log and the access log where `config` says, in its format (idempotent)."""
    for handler in _handlers:
        for logger in (logging.getLogger(), logging.getLogger(ACCESS_LOGGER)):
            logger.removeHandler(handler)
        handler.close()
    _handlers.clear()
    errors, access = _destinations(config)
    backtrack = LEVELS[config.backtrack] if config.backtrack else None
    if config.format == "plain":
        errors.setFormatter(PlainFormatter(PLAIN_FORMAT))
        access.setFormatter(logging.Formatter(PLAIN_ACCESS_FORMAT))
    else:
        formatter = JsonFormatter if config.format == "json" else TextFormatter
        errors.setFormatter(formatter(backtrack))
        access.setFormatter(formatter(None))
    root = logging.getLogger()
    root.setLevel(LEVELS[config.level])
    root.addHandler(errors)
    access_logger = logging.getLogger(ACCESS_LOGGER)
    access_logger.setLevel(logging.INFO)  # switched by POST /accesslog, not by the level
    access_logger.addHandler(access)
    access_logger.propagate = False  # its own destination, not also the error log
    _handlers.extend((errors, access))


def _destinations(config: LogConfig) -> tuple[LineHandler, LineHandler]:
    if config.dir is None:
        return LineHandler(fd=sys.stderr.fileno()), LineHandler(fd=sys.stdout.fileno())
    try:
        os.makedirs(config.dir, exist_ok=True)
        return LineHandler(os.path.join(config.dir, ERROR_FILE)), LineHandler(os.path.join(config.dir, ACCESS_FILE))
    except OSError as exc:
        raise LogSetupError(f"log dir {config.dir}: {exc.strerror or exc}") from exc


def configured() -> bool:
    return bool(_handlers)


def reopen() -> None:
    """Reopens the log files (SIGUSR1, after a logrotate); a failure is logged where the old file was."""
    for handler in _handlers:
        try:
            handler.reopen()
        except OSError as exc:
            logging.getLogger(__name__).error("cannot reopen %s: %s", handler.path, exc.strerror or exc)
