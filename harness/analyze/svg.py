"""Inline SVG plots of the analysis page: bars per setting, dots per run, lines across nights.

Drawn in Python like the report's charts (`harness.report.svg`: the same width, ticks and frame),
so the page needs no script and opens offline. Every label comes from a run's files and is escaped
here before it enters the SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from harness.report.svg import W, fmt_number, nice_ticks, svg_chart

LABEL_W = 430  # room for a setting's words left of the bars
VALUE_W = 120  # room for the value's text right of them
ROW_H = 22
TOP_AXIS = 26


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: nothing to draw (no judged run, no loss ...)
    text: str  # what is written beside the bar ("2 of 3")
    colour: str = "#c92a2a"
    title: str = ""  # the tooltip
    marks: tuple[float, ...] = ()  # extra ticks on the bar's row (e.g. a minimum)


def _label(text: str, limit: int = 62) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _axis(x0: float, width: float, hi: float, y0: float, y1: float, percent: bool) -> list[str]:
    out = []
    for v in nice_ticks(0, hi, 6):
        x = x0 + width * v / hi
        text = f"{v * 100:g} %" if percent else fmt_number(v)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 - 6}" class="tick" text-anchor="middle">{text}</text>')
    return out


def bar_chart(bars: Sequence[Bar], title: str, *, percent: bool = False, hi: float | None = None) -> Markup:
    """One horizontal bar per row, its label on the left and its text on the right."""
    top = max((b.value or 0.0 for b in bars), default=0.0)
    for b in bars:
        top = max([top, *b.marks])
    hi = hi or (top * 1.05 if top > 0 else 1.0)
    x0, width = LABEL_W, W - LABEL_W - VALUE_W
    height = TOP_AXIS + ROW_H * len(bars) + 8
    parts = _axis(x0, width, hi, TOP_AXIS, height - 4, percent)
    for i, b in enumerate(bars):
        y = TOP_AXIS + i * ROW_H
        tip = escape(b.title or f"{b.label}: {b.text}")
        parts.append(
            f'<text x="{x0 - 8}" y="{y + 15}" class="rowlabel" text-anchor="end">{escape(_label(b.label))}'
            f"<title>{tip}</title></text>"
        )
        if b.value is not None:
            w = max(width * min(b.value, hi) / hi, 1.5 if b.value > 0 else 0.0)
            parts.append(
                f'<rect x="{x0}" y="{y + 4}" width="{w:.1f}" height="{ROW_H - 8}" fill="{escape(b.colour)}" '
                f'class="bar"><title>{tip}</title></rect>'
            )
        for m in b.marks:
            mx = x0 + width * min(m, hi) / hi
            parts.append(
                f'<line x1="{mx:.1f}" y1="{y + 2}" x2="{mx:.1f}" y2="{y + ROW_H - 2}" class="mark"/>'
            )
        parts.append(f'<text x="{x0 + width + 8}" y="{y + 15}" class="value">{escape(b.text)}</text>')
    return svg_chart(height, parts, title)


@dataclass(frozen=True)
class Dots:
    label: str
    values: tuple[float, ...]  # one per run
    middle: float | None = None  # the median, drawn as a tick
    links: tuple[str, ...] = ()  # per value: the run's report ("" when none)


def dot_chart(rows: Sequence[Dots], title: str, unit: str = "s") -> Markup:
    """A row of dots per setting (one per run), its median as a bar across the row."""
    top = max((v for r in rows for v in r.values), default=0.0)
    hi = top * 1.05 if top > 0 else 1.0
    x0, width = LABEL_W, W - LABEL_W - VALUE_W
    height = TOP_AXIS + ROW_H * len(rows) + 8
    parts = _axis(x0, width, hi, TOP_AXIS, height - 4, False)
    for i, r in enumerate(rows):
        y = TOP_AXIS + i * ROW_H
        parts.append(
            f'<text x="{x0 - 8}" y="{y + 15}" class="rowlabel" text-anchor="end">{escape(_label(r.label))}'
            f"<title>{escape(r.label)}</title></text>"
        )
        for j, v in enumerate(r.values):
            cx = x0 + width * v / hi
            dot = f'<circle cx="{cx:.1f}" cy="{y + ROW_H / 2:.1f}" r="4" class="dot"><title>{v:g} {unit}</title></circle>'
            link = r.links[j] if j < len(r.links) else ""
            parts.append(f'<a href="{escape(link)}">{dot}</a>' if link else dot)
        if r.middle is not None:
            mx = x0 + width * r.middle / hi
            parts.append(
                f'<line x1="{mx:.1f}" y1="{y + 2}" x2="{mx:.1f}" y2="{y + ROW_H - 2}" class="median"/>'
            )
            parts.append(
                f'<text x="{x0 + width + 8}" y="{y + 15}" class="value">median {r.middle:g} {escape(unit)}</text>'
            )
    return svg_chart(height, parts, title)


@dataclass(frozen=True)
class Series:
    label: str
    colour: str
    values: tuple[float | None, ...]  # one per night (None: no value that night)
    dashed: bool = False


@dataclass
class TrendChart:
    nights: list[str]  # x categories, oldest first
    series: list[Series] = field(default_factory=list)


def trend_chart(chart: TrendChart, title: str, y_label: str) -> Markup:
    """Lines across the nights of one campaign, a point per night (hover: the value)."""
    left, right, top, bottom, height = 64, 210, 20, 46, 210
    n = len(chart.nights)
    hi = max([v for s in chart.series for v in s.values if v is not None] + [1.0]) * 1.1
    pw, ph = W - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (pw * (i + 0.5) / n if n else 0)

    def y(v: float) -> float:
        return top + ph * (1 - v / hi)

    parts = []
    for v in nice_ticks(0, hi, 5):
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" class="grid"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{fmt_number(v)}</text>'
        )
    step = max(1, n // 10)
    for i, night in enumerate(chart.nights):
        if i % step == 0 or i == n - 1:
            parts.append(
                f'<text x="{x(i):.1f}" y="{top + ph + 16}" class="tick" text-anchor="middle">{escape(night)}</text>'
            )
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="frame"/>')
    parts.append(
        f'<text x="14" y="{top + ph / 2:.1f}" class="label" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>'
    )
    parts.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 6}" class="label" text-anchor="middle">campaign runs, oldest to newest</text>'
    )
    for k, s in enumerate(chart.series):
        points = [(x(i), y(v), v) for i, v in enumerate(s.values) if v is not None]
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        if len(points) > 1:
            line = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
            parts.append(
                f'<polyline points="{line}" fill="none" stroke="{escape(s.colour)}" stroke-width="2"{dash}/>'
            )
        for px, py, v in points:
            parts.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{escape(s.colour)}"><title>{escape(s.label)}: {v:g}</title></circle>'
            )
        ly = top + 14 + 18 * k
        parts.append(
            f'<line x1="{left + pw + 12}" y1="{ly - 4}" x2="{left + pw + 32}" y2="{ly - 4}" stroke="{escape(s.colour)}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{left + pw + 38}" y="{ly}" class="legend">{escape(s.label)}</text>')
    return svg_chart(height, parts, title)
