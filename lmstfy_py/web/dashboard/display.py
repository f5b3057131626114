"""How the dashboard shows values: counts, times, tokens, and job data that may be text or binary."""

from __future__ import annotations

import base64
import math
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

from lmstfy_py.types import QueueSettings

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


def age(since_ms: int | None, now_ms: int | None = None) -> str:
    """How long ago a unix time in ms was, in its two largest units ("12 s", "3 m 12 s", "2 h 5 m",
    "3 d 4 h"); a dash for none. For a wait, where "3 min ago" would round away what matters."""
    if since_ms is None:
        return "\u2013"
    seconds = max(0, ((now_ms if now_ms is not None else int(time.time() * 1000)) - since_ms) // 1000)
    units = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)]
    for i, (unit, size) in enumerate(units[:-1]):
        if seconds >= size:
            smaller, small_size = units[i + 1]
            return f"{seconds // size} {unit} {seconds % size // small_size} {smaller}"
    return f"{seconds} s"


def per_second(rate: float) -> str:
    """A rate as jobs a second, without float noise or exponents ("2.5/s", "0.00001/s", "1,000/s")."""
    return f"{rate:,.6f}".rstrip("0").rstrip(".") + "/s"


def limits(settings: QueueSettings) -> list[tuple[str, str, str]]:
    """A queue's flow-control limits (SPEC 14) as (key, label, shown), "none" for one not set; an
    unset burst of a set rate shows the size the server then gives the bucket."""
    rate = settings.rate
    if settings.burst is not None:
        burst = count(settings.burst)
    else:
        burst = f"{max(1, math.ceil(rate))} (default)" if rate else "none"
    return [
        ("max_reserved", "max reserved", count(settings.max_reserved) if settings.max_reserved else "none"),
        ("rate", "rate", per_second(rate) if rate else "none"),
        ("burst", "burst", burst),
        ("group_concurrency", "per group", f"{settings.group_concurrency:,} reserved at once"),
    ]


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
