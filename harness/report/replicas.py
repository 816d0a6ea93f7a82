"""The replicas the report's log pictures draw, as the checker wrote them into evidence.json.

The checker that judged the run read the collected data dirs (`checkers.replica_logs`, or Spark's
reader: the same rules) and wrote, per replica, its log bounds, checkpointed HW, leader epochs and
the records at the offsets the report shows (`checkers.evidence`); the report reads no data dir.
What is wrong on a replica (divergent offsets, acked records absent) is not judged here either: it
is what the replica-log checker recorded in results.json (`marks_from_results`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """One replica's final log: offset -> (value, batch leader epoch), with its marks."""

    node: str
    records: dict[int, tuple[Any, int]] = field(default_factory=dict)
    log_start: int = 0
    log_end: int = 0
    high_watermark: int | None = None
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    problem: str | None = None


@dataclass
class PartitionLogs:
    topic: str
    partition: int
    replicas: dict[str, Replica] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def partition_logs(evidence: dict[str, Any] | None) -> dict[tuple[str, int], PartitionLogs]:
    """Every judged partition's replicas, from evidence.json (empty without it)."""
    found: dict[tuple[str, int], PartitionLogs] = {}
    entries = (evidence or {}).get("replicas")
    for r in entries if isinstance(entries, list) else []:
        if not isinstance(r, dict) or not isinstance(r.get("partition"), int) or r.get("topic") is None:
            continue
        key = (str(r["topic"]), r["partition"])
        logs = found.setdefault(key, PartitionLogs(*key))
        records = r.get("records")
        epochs = r.get("epochs")
        logs.replicas[str(r.get("node"))] = Replica(
            node=str(r.get("node")),
            records={
                int(x[0]): (x[1], int(x[2]))
                for x in (records if isinstance(records, list) else [])
                if isinstance(x, list) and len(x) == 3 and isinstance(x[0], int) and isinstance(x[2], int)
            },
            log_start=_int(r.get("log_start")),
            log_end=_int(r.get("log_end")),
            high_watermark=r["high_watermark"] if isinstance(r.get("high_watermark"), int) else None,
            epochs=[
                (e[0], e[1])
                for e in (epochs if isinstance(epochs, list) else [])
                if isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) for x in e)
            ],
            problem=str(r["problem"]) if r.get("problem") else None,
        )
    return {key: found[key] for key in sorted(found)}


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@dataclass
class Marks:
    """Offsets to draw in red on one replica: different from another replica, or acked and absent."""

    divergent: set[int] = field(default_factory=set)
    missing_acked: set[int] = field(default_factory=set)


def marks_from_results(results: dict[str, Any] | None, logs: PartitionLogs) -> dict[str, Marks]:
    """What the replica-log checker recorded for this partition (results.json `stats.replicas`).

    `divergent`: the offsets it counted as log-divergence, marked on every replica holding a
    record there; `absent_acked` of each replica: acked offsets it does not hold with the acked
    value. Without them (not checked, an older results.json), no replica is marked.
    """
    marks = {node: Marks() for node in logs.replicas}
    replicas = ((results or {}).get("stats") or {}).get("replicas") or {}
    found = replicas.get(logs.name)
    if not isinstance(found, dict):
        return marks
    divergent = _offsets(found.get("divergent"))
    for node, r in logs.replicas.items():
        marks[node].divergent = {o for o in divergent if r.log_start <= o < r.log_end}
    for replica in found.get("replicas") or []:
        if isinstance(replica, dict) and replica.get("node") in marks:
            marks[str(replica["node"])].missing_acked = _offsets(replica.get("absent_acked"))
    return marks


def _offsets(ranges: Any) -> set[int]:
    """[[5, 7], [9, 9]] -> {5, 6, 7, 9}; anything malformed is skipped."""
    out: set[int] = set()
    for r in ranges if isinstance(ranges, list) else []:
        if (
            isinstance(r, list)
            and len(r) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
            and 0 <= r[1] - r[0] < 1_000_000
        ):
            out.update(range(r[0], r[1] + 1))
    return out
