"""Which replicas held damaged data: the history's `corrupt` faults, joined with the anomalies.

A `corrupt` fault's ok value names, per node, what was damaged (docs/faults.md, "Damaged disks"):
the partition, the file and the first damaged offset (a bit flip, a torn tail), or the partitions of
a wiped data dir. This lists each as a damaged replica and counts, per damaged replica, the
examples of the loss anomalies in its partition at or past its first damaged offset (a wipe: all of
them), so a verdict of lost data says whether a damaged replica can explain it, and which one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from history.format import NEMESIS_PROCESS

CORRUPT = "corrupt"
LOSS_ANOMALIES = ("lost-write", "lost-committed-on-replicas", "inconsistent-offsets", "log-divergence")
NS = 1_000_000_000


def damaged_replicas(ops: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per damaged replica (node, topic-partition) per completed corrupt fault."""
    out: list[dict[str, Any]] = []
    for op in ops:
        if op.get("process") != NEMESIS_PROCESS or op.get("f") != CORRUPT or op.get("type") != "ok":
            continue
        value = op.get("value") or {}
        for node, report in sorted((value.get("damage") or {}).items()):
            if not isinstance(report, dict) or not report.get("damaged"):
                continue
            entry: dict[str, Any] = {
                "node": node,
                "kind": report.get("kind", value.get("kind")),
                "fault_id": value.get("fault_id"),
                "time_s": round(int(op.get("time", 0)) / NS, 3),
            }
            if report.get("kind") == "wipe":
                entry["partitions"] = list(report.get("partitions") or [])
            else:
                entry["partitions"] = [f"{report.get('topic')}-{report.get('partition')}"]
                entry["file"] = report.get("file")
                entry["first_damaged_offset"] = report.get("first_damaged_offset")
            out.append(entry)
    return out


def _in_damage(example: dict[str, Any], entry: dict[str, Any]) -> bool:
    tp = f"{example.get('topic')}-{example.get('partition')}"
    if tp not in entry["partitions"]:
        return False
    first = entry.get("first_damaged_offset")
    offset = example.get("offset")
    return first is None or not isinstance(offset, int) or offset >= first


def attribute(entries: list[dict[str, Any]], anomalies: dict[str, Any]) -> list[str]:
    """Count, on each damaged replica, the loss examples its damage covers; the notes to show."""
    notes: list[str] = []
    for entry in entries:
        covered = {
            name: sum(1 for ex in anomalies.get(name, {}).get("examples", []) if _in_damage(ex, entry))
            for name in LOSS_ANOMALIES
        }
        entry["loss_examples_in_damage"] = {k: v for k, v in covered.items() if v}
        where = (
            f"{entry['partitions'][0]} from offset {entry['first_damaged_offset']} ({entry.get('file')})"
            if "first_damaged_offset" in entry
            else f"its whole data dir ({', '.join(entry['partitions']) or 'no partitions'})"
        )
        said = f"replica on {entry['node']} held damaged data ({entry['kind']}, {entry['fault_id']}): {where}"
        if entry["loss_examples_in_damage"]:
            said += "; loss examples inside it: " + ", ".join(
                f"{k} {v}" for k, v in sorted(entry["loss_examples_in_damage"].items())
            )
        notes.append(said)
    return notes
