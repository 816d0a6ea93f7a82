"""The report's power panel: how much the run tested, as results.json's `power` says (the checker
counted it, checkers/power.py; the report only lays it out).

One line for the run, one for the stretch before the first fault, one per fault window, each with
the acknowledged writes, the reads that returned records, the group commits and rebalances, and
the longest stretch without an acknowledged write; rows without load are marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PowerRow:
    what: str
    span: str  # "12.3-25.0 s"
    acked: str
    reads: str
    commits: str
    rebalances: str
    longest: str  # "6.2 s", "-" when no stretch reached a second
    loaded: bool


def _number(v: Any) -> str:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else "?"


def _seconds(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _row(what: str, counts: dict[str, Any], loaded: bool) -> PowerRow:
    lo, hi = _seconds(counts.get("start_s")), _seconds(counts.get("end_s"))
    gap = _seconds(counts.get("longest_without_ack_s"))
    return PowerRow(
        what,
        f"{lo:.1f}-{hi:.1f} s" if lo is not None and hi is not None else "",
        _number(counts.get("acked_writes")),
        _number(counts.get("reads")),
        _number(counts.get("commits")),
        _number(counts.get("rebalances")),
        f"{gap:g} s" if gap else "-",
        loaded,
    )


def power_panel(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """The panel's rows and its verdict words; None when results.json holds no `power`."""
    power = (results or {}).get("power")
    if not isinstance(power, dict):
        return None
    rows: list[PowerRow] = []
    run, load = power.get("run"), power.get("load")
    if isinstance(run, dict) and isinstance(load, dict):
        rows.append(_row("the whole load", {**run, **load}, True))
    before = power.get("before_first_fault")
    if isinstance(before, dict):
        loaded = bool(before.get("acked_writes")) and bool(before.get("reads"))
        rows.append(_row("before the first fault", before, loaded))
    for w in power.get("windows") or []:
        if not isinstance(w, dict):
            continue
        nodes = " ".join(map(str, w.get("nodes") or []))
        what = f"{w.get('fault', '?')} {nodes}".strip()
        if w.get("pattern"):
            what += f" ({w['pattern']})"
        rows.append(_row(what, w, bool(w.get("loaded"))))
    minimum: dict[str, Any] = power["minimum"] if isinstance(power.get("minimum"), dict) else {}
    return {
        "enough": power.get("enough") is True,
        "reasons": [str(r) for r in power.get("reasons") or []],
        "rows": rows,
        "minimum": f"at least {minimum['acked_writes']} acknowledged writes ({minimum.get('why', '')})"
        if isinstance(minimum.get("acked_writes"), int)
        else "",
        "recovery_s": _seconds(power.get("recovery_s")),
    }
