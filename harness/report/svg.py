"""Inline SVG charts for the report: rate and latency over time with fault windows, replica bars.

Drawn in Python so the report needs no script or CDN and opens offline. Every text that comes from
a history or a log is escaped here (markupsafe.escape) before it enters the SVG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from markupsafe import Markup, escape

from harness.report.faults import ShadedWindow
from harness.report.replicas import Marks, PartitionLogs, Replica

OUTCOME_COLOURS = {"ok": "#2b8a3e", "info": "#e8890c", "fail": "#c92a2a"}
POLL_COLOUR = "#5c7cfa"
FAULT_FILL = "#fa5252"
EPOCH_FILLS = ("#d0ebff", "#a5d8ff", "#c5f6fa", "#99e9f2", "#d3f9d8", "#b2f2bb", "#e5dbff", "#d0bfff")

W = 1080
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 52, 36


def nice_ticks(lo: float, hi: float, n: int = 8) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def fmt_number(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.3g}"


class _Frame:
    """A plot area with a linear x (seconds) and a linear or log y."""

    def __init__(self, height: int, t_end: float, y_max: float, log_y: bool = False, y_min: float = 0.0):
        self.h = height
        self.t_end = max(t_end, 1.0)
        self.log_y = log_y
        self.y_min = y_min
        self.y_max = max(y_max, y_min * 10 if log_y else 1.0)
        self.pw = W - LEFT - RIGHT
        self.ph = height - TOP - BOTTOM

    def x(self, t: float) -> float:
        return LEFT + self.pw * min(max(t, 0.0), self.t_end) / self.t_end

    def y(self, v: float) -> float:
        if self.log_y:
            lo, hi = math.log10(self.y_min), math.log10(self.y_max)
            frac = (math.log10(max(v, self.y_min)) - lo) / (hi - lo)
        else:
            frac = (v - self.y_min) / (self.y_max - self.y_min)
        return TOP + self.ph * (1 - min(max(frac, 0.0), 1.0))

    def axes(self, y_label: str) -> list[str]:
        out = []
        for t in nice_ticks(0, self.t_end, 12):
            x = self.x(t)
            out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + self.ph}" class="grid"/>')
            out.append(
                f'<text x="{x:.1f}" y="{TOP + self.ph + 16}" class="tick" text-anchor="middle">{fmt_number(t)}</text>'
            )
        if self.log_y:
            ticks = [
                10.0**e
                for e in range(math.floor(math.log10(self.y_min)), math.ceil(math.log10(self.y_max)) + 1)
            ]
        else:
            ticks = nice_ticks(self.y_min, self.y_max, 5)
        for v in ticks:
            if not (self.y_min <= v <= self.y_max * 1.0001):
                continue
            y = self.y(v)
            out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + self.pw}" y2="{y:.1f}" class="grid"/>')
            out.append(
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{fmt_number(v)}</text>'
            )
        out.append(f'<rect x="{LEFT}" y="{TOP}" width="{self.pw}" height="{self.ph}" class="frame"/>')
        out.append(
            f'<text x="{LEFT + self.pw / 2:.1f}" y="{self.h - 4}" class="label" text-anchor="middle">seconds since the test started</text>'
        )
        out.append(
            f'<text x="14" y="{TOP + self.ph / 2:.1f}" class="label" text-anchor="middle" '
            f'transform="rotate(-90 14 {TOP + self.ph / 2:.1f})">{escape(y_label)}</text>'
        )
        return out

    def faults(self, windows: Sequence[ShadedWindow], load_end: float | None) -> list[str]:
        out = []
        lanes: list[float] = []  # label lanes so labels of close faults do not overlap
        for w in windows:
            x0 = self.x(w.start_s)
            x1 = self.x(w.end_s if w.end_s is not None else self.t_end)
            width = max(x1 - x0, 2.0)
            out.append(
                f'<rect x="{x0:.1f}" y="{TOP}" width="{width:.1f}" height="{self.ph}" class="fault" '
                f'fill="{escape(w.colour)}" stroke="{escape(w.colour)}">'
                f"<title>{escape(w.label)} from {w.start_s:.1f} s"
                f"{f' to {w.end_s:.1f} s' if w.end_s is not None else ' (never healed)'}</title></rect>"
            )
            lane = next((i for i, end in enumerate(lanes) if end < x0), None)
            if lane is None:
                lane = len(lanes)
                lanes.append(0.0)
            label = str(w.label)
            lanes[lane] = x0 + 6.8 * len(label) + 10
            if lane < 3:
                y = TOP - 4 - 13 * lane
                out.append(
                    f'<text x="{x0 + 2:.1f}" y="{y}" class="faultlabel" fill="{escape(w.colour)}">{escape(label)}</text>'
                )
        if load_end is not None and 0 < load_end < self.t_end:
            x = self.x(load_end)
            out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + self.ph}" class="phase"/>')
            text, anchor, tx = "load stops; heal, recover, final reads", "start", x + 3
            if x > W - RIGHT - 240:
                anchor, tx = "end", x - 3
            out.append(
                f'<text x="{tx:.1f}" y="{TOP + 12}" class="phaselabel" text-anchor="{anchor}">{text}</text>'
            )
        return out


def svg_chart(height: int, parts: Iterable[str], title: str) -> Markup:
    body = "\n".join(parts)
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" class="chart" role="img" '
        f'aria-label="{escape(title)}">{body}</svg>'
    )


def rate_chart(
    rate: dict[tuple[str, str], dict[int, int]],
    t_end: float,
    windows: Sequence[ShadedWindow],
    load_end: float | None,
) -> Markup:
    """Completions per second, one line per outcome of sends, and the ok polls."""
    n = max(1, math.ceil(t_end))
    series: list[tuple[str, str, list[int], bool]] = []
    for kind in ("ok", "info", "fail"):
        buckets = rate.get(("send", kind), {})
        if buckets or kind == "ok":
            series.append(
                (f"send {kind}", OUTCOME_COLOURS[kind], [buckets.get(i, 0) for i in range(n)], False)
            )
    polls = rate.get(("poll", "ok"), {})
    if polls:
        series.append(("poll ok", POLL_COLOUR, [polls.get(i, 0) for i in range(n)], True))
    y_max = max([max(s[2], default=0) for s in series] + [1]) * 1.1
    fr = _Frame(260, n, y_max)
    parts = fr.faults(windows, load_end) + fr.axes("completions / s")
    for _label, colour, counts, dashed in series:
        pts = " ".join(f"{fr.x(i + 0.5):.1f},{fr.y(c):.1f}" for i, c in enumerate(counts))
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.8"{dash}/>')
    return svg_chart(260, parts, "throughput over time")


def latency_chart(
    points: Sequence[tuple[float, float, str]],
    t_end: float,
    windows: Sequence[ShadedWindow],
    load_end: float | None,
) -> Markup:
    """Every send (sampled when many) at its completion time, latency on a log scale."""
    lat = [p[1] for p in points if p[1] > 0]
    y_min = 10 ** math.floor(math.log10(max(min(lat, default=1.0), 0.01)))
    y_max = 10 ** math.ceil(math.log10(max(max(lat, default=10.0), y_min * 10)))
    fr = _Frame(300, t_end, y_max, log_y=True, y_min=y_min)
    parts = fr.faults(windows, load_end) + fr.axes("send latency (ms, log)")
    for kind in ("ok", "info", "fail"):  # failures drawn last, on top
        colour = OUTCOME_COLOURS[kind]
        r = 1.6 if kind == "ok" else 2.6
        dots = [
            f'<circle cx="{fr.x(t):.1f}" cy="{fr.y(ms):.1f}" r="{r}"/>' for t, ms, k in points if k == kind
        ]
        if dots:
            opacity = "0.45" if kind == "ok" else "0.85"
            parts.append(f'<g fill="{colour}" fill-opacity="{opacity}">{"".join(dots)}</g>')
    return svg_chart(300, parts, "latency over time")


def replica_chart(logs: PartitionLogs, marks: dict[str, Marks], leader: str | None) -> Markup:
    """Each replica's log as a bar: epochs shaded, HW and log end marked, bad offsets in red.

    Labels never share a line: per row, the HW label sits above the bar, the log end (LEO) in the
    right margin, then one line under the bar lists the epochs and one line says what is red.
    Epoch boundaries are drawn over the red marks, so short epochs stay visible.
    """
    replicas = list(logs.replicas.values())
    row_h, above, below = 30, 18, 34
    pitch = above + row_h + below
    top = TOP - 10
    height = top + len(replicas) * pitch + 34
    end = max([r.log_end for r in replicas] + [r.high_watermark or 0 for r in replicas])
    for m in marks.values():
        end = max([end, *(o + 1 for o in m.missing_acked)])
    end = max(end, 1)
    lo = _zoom_start(replicas, marks, end)
    left, pw = 120, W - 120 - RIGHT - 110
    parts: list[str] = []

    def x(offset: float) -> float:
        return left + pw * (min(max(offset, lo), end) - lo) / (end - lo)

    for t in nice_ticks(lo, end, 10):
        parts.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{height - 30}" class="grid"/>')
        parts.append(
            f'<text x="{x(t):.1f}" y="{height - 16}" class="tick" text-anchor="middle">{fmt_number(t)}</text>'
        )
    axis = f"offset (zoomed in: offsets below {lo} agree and are not drawn)" if lo > 0 else "offset"
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 2}" class="label" text-anchor="middle">{axis}</text>'
    )
    for i, r in enumerate(replicas):
        y = top + i * pitch + above
        name = f"{r.node} (leader)" if r.node == leader else r.node
        parts.append(
            f'<text x="{left - 8}" y="{y + row_h / 2 + 4}" class="rowlabel" text-anchor="end">{escape(name)}</text>'
        )
        parts.append(f'<rect x="{left}" y="{y}" width="{pw}" height="{row_h}" class="emptylog"/>')
        # Epoch stretches from the leader-epoch checkpoint, else from the batches' epochs.
        epochs = sorted(r.epochs, key=lambda e: (e[1], e[0])) or _epochs_from_records(r)
        spans: list[tuple[int, int, int]] = []
        for j, (epoch, start) in enumerate(epochs):
            stop = min(epochs[j + 1][1] if j + 1 < len(epochs) else r.log_end, r.log_end)
            if stop > start and stop > lo:
                spans.append((epoch, start, stop))
        for epoch, start, stop in spans:
            fill = EPOCH_FILLS[epoch % len(EPOCH_FILLS)] if epoch >= 0 else "#dee2e6"
            parts.append(
                f'<rect x="{x(start):.1f}" y="{y}" width="{max(x(stop) - x(start), 1):.1f}" height="{row_h}" '
                f'fill="{fill}"><title>epoch {epoch}: offsets {start}–{stop - 1}</title></rect>'
            )
        if not spans and r.log_end > r.log_start:
            parts.append(
                f'<rect x="{x(r.log_start):.1f}" y="{y}" width="{x(r.log_end) - x(r.log_start):.1f}" height="{row_h}" fill="{EPOCH_FILLS[0]}"/>'
            )
        m = marks.get(r.node, Marks())
        for offsets, cls, what in (
            (m.missing_acked, "missing", "acknowledged, absent here"),
            (m.divergent, "divergent", "differs from another replica"),
        ):
            for a, b in _runs(sorted(offsets)):
                parts.append(
                    f'<rect x="{x(a):.1f}" y="{y + (row_h / 2 if cls == "missing" else 0)}" width="{max(x(b + 1) - x(a), 4):.1f}" '
                    f'height="{row_h / 2}" class="{cls}"><title>offsets {a}–{b}: {what}</title></rect>'
                )
        # Epoch boundaries and in-bar names on top of the red, so every epoch stays readable.
        last_label = -1e9
        for epoch, start, stop in spans:
            bx = x(start)
            if start > lo:
                parts.append(
                    f'<line x1="{bx:.1f}" y1="{y}" x2="{bx:.1f}" y2="{y + row_h}" class="epochline"/>'
                )
            if x(stop) - bx > 36 and bx - last_label > 30 and start not in m.divergent:
                parts.append(f'<text x="{bx + 3:.1f}" y="{y + 12}" class="epoch">e{epoch}</text>')
                last_label = bx
        # Under the bar: the epochs in words (line 1), then what is red (line 2).
        if spans:
            shown = [f"e{e} from {s}" for e, s, _stop in spans]
            text = (
                "epochs: " + ", ".join(shown[:10]) + (f", … ({len(shown)} in all)" if len(shown) > 10 else "")
            )
            parts.append(f'<text x="{left}" y="{y + row_h + 13}" class="epochlist">{escape(text)}</text>')
        if m.divergent or m.missing_acked:
            note = []
            if m.divergent:
                n = len(m.divergent)
                note.append(f"✕ {n} {'offset differs' if n == 1 else 'offsets differ'} from another replica")
            if m.missing_acked:
                n = len(m.missing_acked)
                note.append(f"✕ {n} acknowledged {'record' if n == 1 else 'records'} absent")
            parts.append(
                f'<text x="{left}" y="{y + row_h + 27}" class="badlabel">{escape(" · ".join(note))}</text>'
            )
        parts.append(
            f'<line x1="{x(r.log_end):.1f}" y1="{y - 3}" x2="{x(r.log_end):.1f}" y2="{y + row_h + 3}" class="logend"/>'
        )
        parts.append(
            f'<text x="{left + pw + 8:.1f}" y="{y + row_h / 2 + 4}" class="marklabel">LEO {r.log_end}</text>'
        )
        if r.high_watermark is not None:
            hx = x(r.high_watermark)
            parts.append(
                f'<path d="M{hx - 5:.1f},{y - 8} L{hx + 5:.1f},{y - 8} L{hx:.1f},{y - 1} Z" class="hw"/>'
            )
            anchor, tx = ("end", hx - 8) if hx > left + pw - 60 else ("start", hx + 8)
            hw_text = f"◂ HW {r.high_watermark}" if r.high_watermark < lo else f"HW {r.high_watermark}"
            parts.append(
                f'<text x="{tx:.1f}" y="{y - 3}" class="marklabel" text-anchor="{anchor}">{hw_text}</text>'
            )
        if r.problem:
            parts.append(
                f'<text x="{left + pw + 8:.1f}" y="{y + row_h + 13}" class="marklabel">{escape(r.problem[:40])}<title>{escape(r.problem)}</title></text>'
            )
    return svg_chart(height, parts, f"replica logs of {logs.name}")


def _zoom_start(replicas: Sequence[Replica], marks: dict[str, Marks], end: int) -> int:
    """Where the replica picture starts: 0, or just before the trouble when it sits in a narrow tail.

    Offsets before the first red mark and the shortest log end agree on every replica, so when both
    are within the last quarter of the log the picture zooms in on them (a HW further left is
    drawn at the left edge, its label pointing left).
    """
    bad = [o for m in marks.values() for o in (m.divergent | m.missing_acked)]
    if not bad:
        return 0
    interest = [min(bad)] + [r.log_end for r in replicas]
    first = min(interest)
    if end - first >= end / 4:
        return 0
    return max(0, first - max(10, end - first))


def _epochs_from_records(r: Replica) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    records = r.records
    for offset in sorted(records):
        epoch = records[offset][1]
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return out


def _runs(offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive offsets merged into (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for o in offsets:
        if runs and o == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], o)
        else:
            runs.append((o, o))
    return runs
