"""How the dashboard shows values: counts, times, tokens, and job data that may be text or binary."""

from __future__ import annotations

import base64
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

SHOWN_BYTES = 4096  # of a job's data; the rest is summarised
PREVIEW_CHARS = 80  # of a job's data in a list
PREVIEW_BYTES = 16  # of binary data in a list
TOKEN_SHOWN = 6


def count(value: int) -> str:
    return f"{value:,}"


def noun(value: int, singular: str, plural_form: str = "") -> str:
    """The noun that goes after a count: singular for exactly 1 ("1 job", "0 jobs", "2 jobs")."""
    return singular if value == 1 else plural_form or singular + "s"


def plural(value: int, singular: str, plural_form: str = "") -> str:
    """A count and its noun: "1 dead job", "1,024 dead jobs"."""
    return f"{count(value)} {noun(value, singular, plural_form)}"


def when(ms: int | None) -> str:
    """A unix time in ms as UTC, to the second; a dash for none."""
    if ms is None:
        return "\u2013"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(ms: int | None) -> str:
    """How far a unix time in ms is from now, in words ("in 5 s", "3 min ago")."""
    if ms is None:
        return ""
    delta = ms / 1000 - time.time()
    amount = abs(delta)
    if amount < 120:
        text = f"{amount:.0f} s"
    elif amount < 7200:
        text = f"{amount / 60:.0f} min"
    else:
        text = f"{amount / 3600:.1f} h"
    return f"in {text}" if delta > 0 else f"{text} ago"


def short_token(token: str) -> str:
    """Enough of a token to tell it apart on screen, not enough to use it."""
    return token[:TOKEN_SHOWN] + "…" if len(token) > TOKEN_SHOWN else token


@dataclass(frozen=True, slots=True)
class Data:
    """A job's data as the page shows it: as text when it is printable UTF-8, else as hex and base64."""

    size: int
    text: str | None  # None: binary
    hex: str
    base64: str
    truncated: bool


def data(body: bytes) -> Data:
    shown = body[:SHOWN_BYTES]
    truncated = len(body) > SHOWN_BYTES
    text = _printable(shown, truncated)
    spaced = shown.hex(" ") if text is None else ""
    encoded = base64.b64encode(shown).decode("ascii") if text is None else ""
    return Data(len(body), text, spaced, encoded, truncated)


def text_of(body: bytes) -> str | None:
    """All of a job's data as text when it is printable UTF-8 (to edit it in a form), else None."""
    return _printable(body, truncated=False)


def _printable(shown: bytes, truncated: bool) -> str | None:
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Cut in the middle of a character by the truncation: the text before it.
        if not truncated or exc.start < len(shown) - 3:
            return None
        text = shown[: exc.start].decode("utf-8")
    if any(unicodedata.category(char) == "Cc" and char not in "\n\r\t" for char in text):
        return None
    return text


def preview(body: bytes) -> str:
    """A job's data in one short line, for lists: its start as text, or as hex when it is binary."""
    shown = data(body)
    if shown.text is None:
        start = body[:PREVIEW_BYTES].hex(" ")
        return f"binary, {plural(len(body), 'byte')}: {start}" + (" …" if len(body) > PREVIEW_BYTES else "")
    line = " ".join(shown.text.split())
    return line[:PREVIEW_CHARS] + "…" if len(line) > PREVIEW_CHARS or shown.truncated else line
