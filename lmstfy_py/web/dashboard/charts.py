"""Charts drawn as inline SVG on the server: no chart library, no script, nothing to fetch. The rate
charts below; the due histogram (`due_chart`) at the end.

Two lines per chart, jobs published and jobs consumed per minute, oldest minute at the left and
the current (unfinished) minute at the right, each minute a flat step (see `_path`). Colours come
from the stylesheet (classes `pub`, `con`), so the page's Content-Security-Policy needs no inline style.
"""

from __future__ import annotations

from markupsafe import Markup, escape

from lmstfy_py.admin.rates import Rates
from lmstfy_py.types import DueBuckets
from lmstfy_py.web.dashboard.display import plural

# A chart's drawing box (viewBox units). The SVG stretches to the box the stylesheet gives it
# (preserveAspectRatio="none", strokes that do not scale); its labels are HTML around it, so they
# stay readable from a phone's width to a wide screen.
WIDTH, HEIGHT = 600, 100
SPARK_WIDTH, SPARK_HEIGHT = 120, 28


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is >= value (at least 1): the y axis's top."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def _path(values: list[int], top: int, box: tuple[float, float, float, float]) -> str:
    """An SVG path: each minute a flat segment at its count, across its own width.

    A count is of a whole minute, not of an instant: a line from point to point made a lone busy
    minute (the one publish of a new queue) a spike rising from the axis. Here it is a short
    flat line at its height. Minutes with no job lie on the axis; consecutive busy minutes are
    joined by a riser, but a busy minute and an idle one are not, so no line climbs from the axis.
    """
    x0, y0, width, height = box
    slots = max(len(values), 1)
    drawn: list[str] = []
    before: int | None = None
    for i, value in enumerate(values):
        y = y0 + height - height * value / top
        joined = before is not None and (before > 0) == (value > 0)
        drawn.append(f"{'L' if joined else 'M'}{x0 + width * i / slots:.1f},{y:.1f}H{x0 + width * (i + 1) / slots:.1f}")
        before = value
    return "".join(drawn)


def summary(rates: Rates) -> str:
    """The chart in words, for screen readers and the tooltip."""
    minutes = len(rates.published)
    return (
        f"last {plural(minutes, 'minute')}: {sum(rates.published):,} published, {sum(rates.consumed):,} consumed; "
        f"this minute: {rates.published[-1]:,} published, {rates.consumed[-1]:,} consumed"
    )


def rate_chart(rates: Rates, chart_id: str) -> Markup:
    """A full chart with its y scale (jobs per minute) and time axis."""
    top = nice_ceiling(max([*rates.published, *rates.consumed, 1]))
    box = (0.0, 1.0, float(WIDTH), HEIGHT - 2.0)
    minutes = len(rates.published)
    text = escape(summary(rates))
    grid = "".join(
        f'<line class="grid" x1="0" y1="{y:.1f}" x2="{WIDTH}" y2="{y:.1f}"/>' for y in (1.0, HEIGHT / 2, HEIGHT - 1.0)
    )
    y_labels = "".join(f"<span>{_short(top * fraction)}</span>" for fraction in (1.0, 0.5, 0.0))
    x_labels = f"<span>\u2212{minutes - 1} min</span><span>\u2212{(minutes - 1) // 2} min</span><span>now</span>"
    return Markup(
        f'<figure id="{escape(chart_id)}" class="chart-box" data-top="{top}">'
        f'<div class="y-axis" aria-hidden="true">{y_labels}</div>'
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" aria-label="{text}">'
        f"<title>{text}</title>{grid}"
        f'<path class="con" d="{_path(rates.consumed, top, box)}"/>'
        f'<path class="pub" d="{_path(rates.published, top, box)}"/></svg>'
        f'<div class="x-axis" aria-hidden="true">{x_labels}</div>'
        f'<figcaption class="meta">{text}</figcaption></figure>'
    )


def sparkline(rates: Rates) -> Markup:
    """A small chart for a table row: the same two lines, no axes, scaled to their own top."""
    top = max([*rates.published, *rates.consumed, 1])
    box = (1.0, 2.0, SPARK_WIDTH - 2.0, SPARK_HEIGHT - 4.0)
    return Markup(
        f'<svg class="spark" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img" '
        f'aria-label="{escape(summary(rates))}"><title>{escape(summary(rates))}</title>'
        f'<path class="con" d="{_path(rates.consumed, top, box)}"/>'
        f'<path class="pub" d="{_path(rates.published, top, box)}"/></svg>'
    )


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


# The due histogram's bars (SPEC 14): a DueBuckets field, the bar's key (data-due) and its label, soonest first.
DUE_BARS = (
    ("within_1m", "1m", "\u2264 1 min"),
    ("within_1h", "1h", "1 min\u20131 h"),
    ("within_1d", "1d", "1 h\u201324 h"),
    ("later", "1d+", "> 24 h"),
)
BAR_WIDTH, BARS_HEIGHT = 100, 60


def due_chart(due: DueBuckets, chart_id: str) -> Markup:
    """The delayed jobs by time left until due: one bar per bucket, scaled to the largest, each
    labelled with its range and count in HTML below (readable at any width)."""
    counts = [(key, label, int(getattr(due, field))) for field, key, label in DUE_BARS]
    top = max([n for _, _, n in counts] + [1])
    bars, labels = [], []
    for i, (key, label, n) in enumerate(counts):
        height = (BARS_HEIGHT - 1) * n / top
        x = BAR_WIDTH * i + BAR_WIDTH * 0.15
        bars.append(
            f'<rect class="bar" data-due="{key}" x="{x:.1f}" y="{BARS_HEIGHT - height:.1f}" '
            f'width="{BAR_WIDTH * 0.7:.1f}" height="{height:.1f}"/>'
        )
        labels.append(f'<span data-due-label="{key}"><b>{n:,}</b> {escape(label)}</span>')
    text = escape("delayed jobs due: " + ", ".join(f"{label}: {n:,}" for _, label, n in counts))
    width = BAR_WIDTH * len(counts)
    return Markup(
        f'<figure id="{escape(chart_id)}" class="bars-box">'
        f'<svg class="bars" viewBox="0 0 {width} {BARS_HEIGHT}" preserveAspectRatio="none" role="img" '
        f'aria-label="{text}"><title>{text}</title>'
        f'<line class="grid" x1="0" y1="{BARS_HEIGHT}" x2="{width}" y2="{BARS_HEIGHT}"/>{"".join(bars)}</svg>'
        f'<div class="bar-labels">{"".join(labels)}</div></figure>'
    )
