"""Read the collected data dirs into per-partition replica summaries for the report's log picture.

The layout is Kafka's: `<run>/nodes/<node>/data/<topic>-<partition>/*.log` (v2 record batches),
`leader-epoch-checkpoint` in the partition dir, and `replication-offset-checkpoint` (the HW) in the
data dir. The segments are read with the checker's kafka.record reader (`checkers.data_dirs`) and
values decoded as the checker decodes them (`checkers.replica_logs.decode_value`). What is wrong
on a replica (divergent offsets, acked records absent) is not judged here: it is what the
replica-log checker recorded in results.json (`marks_from_results`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.data_dirs import iter_batches
from checkers.replica_logs import decode_value

log = logging.getLogger(__name__)

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


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


def read_checkpoint(path: Path) -> list[list[str]]:
    """Kafka's text checkpoint: version line, count line, then entries of space-separated fields."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    if len(lines) < 2:
        return []
    return [line.split() for line in lines[2:] if line.strip()]


def _iter_records(partition_dir: Path, problems: list[str]) -> Iterator[tuple[int, Any, int]]:
    """(offset, value, leader epoch of its batch) for every record in the partition's segments."""
    for batch in iter_batches(partition_dir):
        if not batch.crc_ok:
            problems.append(f"CRC mismatch in the batch at offset {batch.base_offset}")
        if batch.is_control:
            continue
        for offset, value in batch.records:
            yield int(offset), decode_value(value), int(batch.partition_leader_epoch)


def read_partition_logs(nodes_dir: Path) -> dict[tuple[str, int], PartitionLogs]:
    """Every partition found under nodes/<node>/data/, with each node's replica."""
    found: dict[tuple[str, int], PartitionLogs] = {}
    if not nodes_dir.is_dir():
        return found
    for node_dir in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
        data = node_dir / "data"
        if not data.is_dir():
            continue
        for pdir in sorted(p for p in data.rglob("*") if p.is_dir()):
            m = _PARTITION_DIR.match(pdir.name)
            if not m or not (any(pdir.glob("*.log")) or (pdir / "leader-epoch-checkpoint").exists()):
                continue
            key = (m["topic"], int(m["partition"]))
            logs = found.setdefault(key, PartitionLogs(*key))
            logs.replicas[node_dir.name] = _read_replica(node_dir.name, pdir, key)
    return found


def _read_replica(node: str, pdir: Path, key: tuple[str, int]) -> Replica:
    r = Replica(node=node)
    problems: list[str] = []
    try:
        for offset, value, epoch in _iter_records(pdir, problems):
            r.records[offset] = (value, epoch)
    except Exception as e:  # show what could be read, and say why the rest could not
        problems.append(f"could not decode: {type(e).__name__}: {e}")
    if problems:
        r.problem = "; ".join(problems[:3])
    if r.records:
        r.log_start = min(r.records)
        r.log_end = max(r.records) + 1
    for entry in read_checkpoint(pdir / "leader-epoch-checkpoint"):
        if len(entry) >= 2 and entry[0].lstrip("-").isdigit() and entry[1].isdigit():
            r.epochs.append((int(entry[0]), int(entry[1])))
    for entry in read_checkpoint(pdir.parent / "replication-offset-checkpoint"):
        if len(entry) >= 3 and entry[0] == key[0] and entry[1] == str(key[1]) and entry[2].isdigit():
            r.high_watermark = int(entry[2])
    return r


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
