"""Dependency cycles between transactions (G0, G1c) in words and as a picture.

An example (checkers/txn_graph.py) names the transactions of a cycle (`cycle`, by history index)
and the `steps` between them: a **ww** step says one transaction's record came right before the
next one's on a partition, a **wr** step says the next one polled the first one's record. The
sentence reads the steps in order; the drawing puts the transactions on a circle and the steps on
arrows. Everything taken from the results (values, topics) is escaped before it enters the SVG.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

WW_COLOUR = "#8a5a00"
WR_COLOUR = "#1f5fa8"


def _step_words(step: dict[str, Any]) -> str:
    where = f"{step.get('topic')}-{step.get('partition')}"
    a, b = f"T{step.get('from')}", f"T{step.get('to')}"
    if step.get("type") == "wr":
        return f"{b} polled {a}'s {step.get('value')} ({where} offset {step.get('offset')})"
    return (
        f"{a}'s {step.get('value')} came right before {b}'s {step.get('next_value')} on {where}"
        f" (offsets {step.get('offset')} and {step.get('next_offset')})"
    )


def cycle_sentence(name: str, example: dict[str, Any]) -> str:
    """'Transactions T4 and T9 form a cycle of wr edges: T9 polled T4's 17 (...), and T4 polled ...'"""
    cycle = [f"T{t}" for t in example.get("cycle") or []]
    steps = [s for s in example.get("steps") or [] if isinstance(s, dict)]
    who = (
        " and ".join(cycle)
        if len(cycle) == 2
        else ", ".join(cycle[:-1]) + f" and {cycle[-1]}"
        if cycle
        else "Transactions"
    )
    if name == "G0":
        kind = "a write cycle"
        why = "Kafka does not isolate transactions' writes, so this is allowed"
    elif example.get("wr_only"):
        kind = "a cycle of information flow through reads alone"
        why = (
            "each read means its writer had committed before the reader ended, so each would have"
            " had to commit before the other: read_committed cannot produce this"
        )
    else:
        kind = "a cycle of information flow"
        why = "it runs through a write-write order, which Kafka's missing write isolation allows"
    size = example.get("size")
    among = f" (a knot of {size} transactions)" if isinstance(size, int) and size > len(cycle) else ""
    listed = "; ".join(_step_words(s) for s in steps)
    return f"Transactions {who} form {kind}{among}: {listed}. {why[:1].upper() + why[1:]}."


def cycle_svg(example: dict[str, Any]) -> Markup | None:
    """The cycle's transactions on a circle, each step an arrow labelled with its edge."""
    cycle = [t for t in example.get("cycle") or [] if isinstance(t, int) and not isinstance(t, bool)]
    steps = [s for s in example.get("steps") or [] if isinstance(s, dict)]
    if len(cycle) < 2 or len(steps) != len(cycle):
        return None
    n = len(cycle)
    radius = 70 + 14 * max(0, n - 3)
    width, height = 2 * radius + 260, 2 * radius + 120
    cx, cy = width / 2, height / 2
    at = {
        t: (cx + radius * math.cos(2 * math.pi * i / n - math.pi / 2), cy + radius * math.sin(2 * math.pi * i / n - math.pi / 2))
        for i, t in enumerate(cycle)
    }  # fmt: skip
    parts = [
        "<defs>",
        *(
            f'<marker id="arrow-{k}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{c}"/></marker>'
            for k, c in (("ww", WW_COLOUR), ("wr", WR_COLOUR))
        ),
        "</defs>",
    ]
    node_r = 24
    for step in steps:
        a, b = step.get("from"), step.get("to")
        if a not in at or b not in at:
            return None
        (x1, y1), (x2, y2) = at[a], at[b]
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        sx, sy, ex, ey = x1 + ux * node_r, y1 + uy * node_r, x2 - ux * node_r, y2 - uy * node_r
        # bend each arrow to its left (two transactions: two arrows side by side) or outwards; its
        # label sits beyond the curve's middle on that side
        nx, ny = -uy, ux
        if n > 2 and nx * ((sx + ex) / 2 - cx) + ny * ((sy + ey) / 2 - cy) < 0:
            nx, ny = -nx, -ny  # around a circle of three or more, bend outwards
        mx, my = (sx + ex) / 2 + nx * 22, (sy + ey) / 2 + ny * 22
        lx, ly = (sx + ex) / 4 + mx / 2 + nx * 8, (sy + ey) / 4 + my / 2 + ny * 8 + 3
        anchor = "start" if nx > 0.3 else "end" if nx < -0.3 else "middle"
        kind = "wr" if step.get("type") == "wr" else "ww"
        colour = WR_COLOUR if kind == "wr" else WW_COLOUR
        label = f"{kind} {step.get('topic')}-{step.get('partition')} v{step.get('value')}"
        parts.append(
            f'<path d="M {sx:.1f} {sy:.1f} Q {mx:.1f} {my:.1f} {ex:.1f} {ey:.1f}" fill="none" '
            f'stroke="{colour}" stroke-width="1.6" marker-end="url(#arrow-{kind})">'
            f"<title>{escape(_step_words(step))}</title></path>"
            f'<text x="{lx:.1f}" y="{ly:.1f}" class="edgelabel" fill="{colour}" text-anchor="{anchor}">'
            f"{escape(label)}</text>"
        )
    for t, (x, y) in at.items():
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_r}" fill="#fff" stroke="#333"/>'
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" class="node">T{escape(str(t))}</text>'
        )
    body = "".join(parts)
    title = escape(f"dependency cycle of {n} transactions")
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="cycle" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{title}">'
        f"<style>.edgelabel{{font:10px sans-serif}}.node{{font:11px sans-serif}}</style>{body}</svg>"
    )
