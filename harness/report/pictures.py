"""The replica pictures: which partitions to draw, and the offsets where replicas are wrong.

Each picture is one partition's final logs (bars by leader epoch, from `report.svg`), the offsets
acknowledged but absent on some replicas as ranges, and a table of the first offsets where
replicas disagree, red only in the cells that are wrong.
"""

from __future__ import annotations

from typing import Any

from harness.report.replicas import PartitionLogs


def _ranges(offsets: list[int], limit: int = 8) -> str:
    """[226, 227, 228, 240] -> '226–228, 240' (the first `limit` runs, then how many more)."""
    runs: list[list[int]] = []
    for o in sorted(offsets):
        if runs and o == runs[-1][1] + 1:
            runs[-1][1] = o
        else:
            runs.append([o, o])
    text = ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in runs[:limit])
    return text + (f", … ({len(runs) - limit} more runs)" if len(runs) > limit else "")


def missing_groups(marks: dict[str, Any]) -> list[dict[str, Any]]:
    """Acked-but-absent offsets per group of replicas that miss the same ones, as ranges."""
    groups: dict[frozenset[int], list[str]] = {}
    for node, m in marks.items():
        if m.missing_acked:
            groups.setdefault(frozenset(m.missing_acked), []).append(node)
    out = []
    for offsets, nodes in groups.items():
        who = "every replica" if len(nodes) == len(marks) and len(nodes) > 1 else ", ".join(nodes)
        out.append({"who": who, "count": len(offsets), "ranges": _ranges(list(offsets))})
    return out


def leaders(state: Any) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    parts = state.get("partitions") if isinstance(state, dict) else None
    items = parts.values() if isinstance(parts, dict) else parts if isinstance(parts, list) else []
    for p in items:
        if isinstance(p, dict) and p.get("topic") is not None and isinstance(p.get("partition"), int):
            if p.get("leader") is not None:
                out[(str(p["topic"]), p["partition"])] = str(p["leader"])
    return out


def state_of(state: Any, key: tuple[str, int]) -> str:
    parts = state.get("partitions") if isinstance(state, dict) else None
    items = parts.values() if isinstance(parts, dict) else parts if isinstance(parts, list) else []
    for p in items:
        if isinstance(p, dict) and (str(p.get("topic")), p.get("partition")) == key:
            isr = p.get("isr")
            return f"leader {p.get('leader')}, leader epoch {p.get('leader_epoch')}, ISR {', '.join(map(str, isr)) if isinstance(isr, list) else isr}"
    return ""


def divergence_table(
    logs: PartitionLogs, marks: Any, acked: dict[int, Any] | None = None
) -> dict[str, Any] | None:
    """The first offsets where replicas disagree or miss acked records: offset × replica values.

    Only the cells that are wrong are red: a value other than the acknowledged one, or (with no ack
    at that offset) other than the value most replicas hold; an absent record only when acked.
    """
    offsets = sorted({o for m in marks.values() for o in (m.divergent | m.missing_acked)})[:12]
    if not offsets:
        return None
    nodes = list(logs.replicas)
    rows = []
    for o in offsets:
        held = {n: logs.replicas[n].records.get(o) for n in nodes}
        reference = _reference_value(o, held, acked or {})
        cells = []
        for n in nodes:
            rec = held[n]
            if rec is None:
                bad = o in marks[n].missing_acked
            elif reference is _NO_REFERENCE:
                bad = o in marks[n].divergent
            else:
                bad = rec[0] != reference
            cells.append({"text": f"{rec[0]} (e{rec[1]})" if rec else "—", "bad": bad})
        rows.append({"offset": o, "cells": cells, "acked": acked.get(o, "") if acked else ""})
    return {"nodes": nodes, "rows": rows}


_NO_REFERENCE = object()


def _reference_value(offset: int, held: dict[str, Any], acked: dict[int, Any]) -> Any:
    """The value an offset should hold: the acked one, else a strict majority's, else none known."""
    if offset in acked:
        return acked[offset]
    counts: dict[Any, int] = {}
    for rec in held.values():
        if rec is not None:
            counts[rec[0]] = counts.get(rec[0], 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    if ranked and (len(ranked) == 1 or ranked[0] > ranked[1]):
        return max(counts, key=lambda v: counts[v])
    return _NO_REFERENCE
