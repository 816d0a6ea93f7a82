"""Read the collected data dirs into per-partition replica summaries for the report's log picture.

The layout is Kafka's: `<run>/nodes/<node>/data/<topic>-<partition>/*.log` (v2 record batches),
`leader-epoch-checkpoint` in the partition dir, and `replication-offset-checkpoint` (the HW) in the
data dir. The segments are read with the checker's kafka.record reader (`checkers.data_dirs`). Values are ASCII decimal; anything else is kept as text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.data_dirs import iter_batches

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
            yield int(offset), _decode(value), int(batch.partition_leader_epoch)


def _decode(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("ascii", errors="replace")
        return int(text) if text.isdigit() else text
    return value


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


def compare(logs: PartitionLogs, acked: dict[int, Any]) -> dict[str, Marks]:
    """Divergence (two replicas, one offset, two values, below both log ends) and acked-but-absent."""
    marks = {node: Marks() for node in logs.replicas}
    replicas = list(logs.replicas.values())
    for i, a in enumerate(replicas):
        for b in replicas[i + 1 :]:
            upto = min(a.log_end, b.log_end)
            for offset, (value, _e) in a.records.items():
                if offset < upto and offset in b.records and b.records[offset][0] != value:
                    marks[a.node].divergent.add(offset)
                    marks[b.node].divergent.add(offset)
    for offset, value in acked.items():
        for r in replicas:
            have = r.records.get(offset)
            if have is None or have[0] != value:
                if have is not None or offset >= r.log_start:
                    marks[r.node].missing_acked.add(offset)
    return marks
