"""How the report shades faults: each window (history.faults) with a label and its package's colour.

The windows themselves are defined once, in `history.faults` (the checkers' statistics read the
same); this module only says, in a reader's words, what each fault did ('kill leader n2',
'partition n1 | n2 n3') and colours it as its nemesis package says (`nemesis.packages.SHADES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from history.faults import fault_windows, nodes_of
from nemesis.packages import SHADES

NS = 1_000_000_000
DEFAULT_COLOUR = "#fa5252"
ROLES = ("leader", "follower", "followers", "controller")


@dataclass(frozen=True)
class ShadedWindow:
    """A stretch of time during which a fault was in force, as the report draws it."""

    f: str
    label: str
    start_s: float
    end_s: float | None  # None: never healed within the history
    info: bool = False  # the fault's outcome was uncertain
    colour: str = DEFAULT_COLOUR
    pattern: str = ""  # the pattern it is a part of (docs/faults.md), if any


def shaded_windows(nemesis_ops: list[dict[str, Any]]) -> list[ShadedWindow]:
    """The history's fault windows, from each fault's invocation to its heal's completion."""
    return [
        ShadedWindow(
            f=w.f,
            label=describe_fault({"f": w.f, "value": w.value}),
            start_s=w.invoked_ns / NS,
            end_s=w.healed_ns / NS if w.healed_ns is not None else None,
            info=w.outcome == "info",
            colour=SHADES.get(w.f, {}).get("color", DEFAULT_COLOUR),
            pattern=_pattern_name(w.value),
        )
        for w in fault_windows(nemesis_ops)
    ]


def _pattern_name(value: Any) -> str:
    pattern = value.get("pattern") if isinstance(value, dict) else None
    return str(pattern.get("name") or "") if isinstance(pattern, dict) else ""


def describe_fault(op: dict[str, Any]) -> str:
    """A short human label for a nemesis op: 'kill leader n2', 'partition n1 | n2 n3'."""
    f = str(op.get("f"))
    value = op.get("value")
    if isinstance(value, dict):
        if isinstance(value.get("components"), list) and value["components"]:
            parts = [" ".join(map(str, c)) if isinstance(c, list) else str(c) for c in value["components"]]
            return f"{f} {' | '.join(parts)}"[:80]
        if "grudge" in value and isinstance(value["grudge"], dict | list):
            return f"{f} {_grudge_text(value['grudge'])}"
        role = value.get("role") or (value.get("target") if value.get("target") in ROLES else None)
        who = " ".join(nodes_of(value))
        if role:
            who = f"{role} {who}".strip()
        extra = [
            f"{k}={v}"
            for k, v in value.items()
            if k in ("delta", "skew", "offset_s", "loss", "probability", "percent", "ms")
        ]
        return " ".join(x for x in (f, who, *extra) if x)
    nodes = nodes_of(value)
    return f"{f} {' '.join(nodes)}".strip()


def _grudge_text(grudge: Any) -> str:
    if isinstance(grudge, dict):
        parts = [f"{k}✕{','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in grudge.items() if v]
        return " ".join(parts)[:60]
    return " | ".join(" ".join(map(str, g)) if isinstance(g, list) else str(g) for g in grudge)[:60]
