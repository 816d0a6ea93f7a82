"""Run directories and replica data dirs for the checkers' tests (segments written with broker.storage)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.storage import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpoint
from broker.storage.build import build_batch
from broker.storage.segment import segment_name
from checkers.replica_logs import ReplicaFindings, read_replica
from foundation.config import TestConfig
from tests.support.history_builder import write_history


def write_replica(
    nodes: Path,
    node: str,
    topic: str,
    partition: int,
    batches: list[tuple[int, list[bytes | None]]],
    hw: int | None = None,
) -> Path:
    """Write one replica: batches of (base offset, values) into one segment file."""
    data = nodes / node / "data"
    log_dir = data / f"{topic}-{partition}"
    log_dir.mkdir(parents=True, exist_ok=True)
    segment = log_dir / segment_name(batches[0][0] if batches else 0)
    segment.write_bytes(
        b"".join(build_batch(values, base_offset=base, leader_epoch=1) for base, values in batches)
    )
    if hw is not None:
        checkpoint = OffsetCheckpoint(data / REPLICATION_OFFSET_CHECKPOINT)
        checkpoint.write({**checkpoint.read(), (topic, partition): hw})
    return segment


def values(*numbers: int) -> list[bytes | None]:
    return [str(n).encode() for n in numbers]


def no_replica_anomalies() -> ReplicaFindings:
    empty = {"count": 0, "examples": []}
    return ReplicaFindings({"log-divergence": empty, "lost-committed-on-replicas": empty}, {}, [], [])  # type: ignore[dict-item]


def make_run(
    tmp_path: Path, ops: list[dict[str, Any]], *, drain: bool | None = True, replicas: bool = True
) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    config = TestConfig(topics=1, partitions=2, replication_factor=2, nodes=2, min_insync=1, seed=7)
    (run / "test.json").write_text(json.dumps({"config": config.to_json(), "seed": 7}))
    write_history(run / "history.jsonl", ops)
    if drain is not None:
        (run / "drain.json").write_text(
            json.dumps({"complete": drain, "reason": "" if drain else "time bound passed"})
        )
    if replicas:
        logs: dict[int, list[int]] = {0: [], 1: []}
        for op in ops:
            if op["f"] == "poll" and op["type"] == "ok":
                for r in op["records"]:
                    log = logs[r["partition"]]
                    if r["offset"] == len(log):
                        log.append(r["value"])
        for node in ("n1", "n2"):
            for partition, log in logs.items():
                write_replica(run / "nodes", node, "t0", partition, [(0, values(*log))] if log else [])
    return run


def plant_replica_loss(run: Path, partition: int = 0) -> int:
    """Overwrite one acknowledged record of a run's partition on n1 (the leader: the longest log,
    no cluster state names one) with another value: that offset diverges between the replicas and
    the acked value is lost on the leader. Returns the offset."""
    data = run / "nodes" / "n1" / "data" / f"t0-{partition}"
    records = sorted(read_replica("n1", "t0", partition, data, None).records.items())
    assert records, "no record to overwrite"
    offset = records[len(records) // 2][0]
    log = dict(records)
    log[offset] = 10**9 + offset
    for segment in data.glob("*.log"):
        segment.unlink()
    write_replica(run / "nodes", "n1", "t0", partition, [(0, [str(log[o]).encode() for o in sorted(log)])])
    return offset
