"""Read the collected data dirs into per-partition replica summaries for the report's log picture.

The layout is Kafka's: `<run>/nodes/<node>/data/<topic>-<partition>/*.log` (v2 record batches),
`leader-epoch-checkpoint` in the partition dir, and `replication-offset-checkpoint` (the HW) in the
data dir. Each replica is read exactly as the replica-log checker reads it
(`checkers.replica_logs.read_replicas`: the same partition dirs, the same values, its log up to the
first batch that fails its CRC, `log_start`/`log_end` from its batches), with each record's batch
leader epoch and the partition's leader-epoch-checkpoint beside it; the picture shows the logs the
checker judged. What is wrong on a replica (divergent offsets, acked records absent) is not judged
here: it is what the replica-log checker recorded in results.json (`marks_from_results`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.replica_logs import ReplicaLog, read_replicas

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


def read_partition_logs(nodes_dir: Path) -> dict[tuple[str, int], PartitionLogs]:
    """Every partition found under nodes/<node>/data/, with each node's replica."""
    found: dict[tuple[str, int], PartitionLogs] = {}
    replicas, _ = read_replicas(nodes_dir, epochs=True)
    for key in sorted(replicas):
        logs = found.setdefault(key, PartitionLogs(*key))
        for replica in sorted(replicas[key], key=lambda r: r.node):
            logs.replicas[replica.node] = _replica(replica)
    return found


def _replica(log_: ReplicaLog) -> Replica:
    epochs_of = log_.record_epochs or {}
    return Replica(
        node=log_.node,
        records={offset: (value, epochs_of.get(offset, -1)) for offset, value in log_.records.items()},
        log_start=log_.log_start,
        log_end=log_.log_end,
        high_watermark=log_.high_watermark,
        epochs=list(log_.epoch_checkpoint or []),
        problem="; ".join(log_.problems[:3]) or None,
    )


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
