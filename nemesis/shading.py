"""How a report shades faults: windows from each fault's `ok` to its heal, read from the history.

`fault_windows(ops)` pairs a nemesis op with the heal that carries the same `fault_id`; a fault
never healed runs to the end of the history. Colours and labels come from each package's `shade`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nemesis.packages import PACKAGES

_BY_F = {p.f: p for p in PACKAGES.values()}


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{fault, f, fault_id, start_ns, end_ns | None, nodes, color, label, value}] in start order."""
    open_: dict[str, dict[str, Any]] = {}
    windows: list[dict[str, Any]] = []
    for op in ops:
        if op.get("process") != "nemesis" or op.get("type") != "ok":
            continue
        value = op.get("value") or {}
        fault_id = value.get("fault_id") if isinstance(value, dict) else None
        if not fault_id:
            continue
        if fault_id in open_:
            window = open_.pop(fault_id)
            window["end_ns"] = op["time"]
            continue
        package = _BY_F.get(op["f"])
        if package is None:
            continue
        window = {
            "fault": package.name,
            "f": op["f"],
            "fault_id": fault_id,
            "start_ns": op["time"],
            "end_ns": None,
            "nodes": value.get("nodes") or sorted((value.get("grudge") or {}).keys()),
            "color": package.shade.get("color", "#999999"),
            "label": package.shade.get("label", package.name),
            "value": value,
        }
        windows.append(window)
        if package.name != "restart":
            open_[fault_id] = window
        else:
            window["end_ns"] = op["time"]
    return windows
