"""log-divergence: after the final reads, two replicas hold different records at one offset below the smaller of their log ends."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import Anomaly
from checkers.rules.rows import ReplicaPosition
from history import logs


def holds(c: Any, row: ReplicaPosition[Any]) -> Any:
    return logs.log_divergence(c, row.covering, row.differ, row.differ_settled)


RULE = Anomaly(
    name="log-divergence",
    description="after the final reads, two replicas hold different records at one offset below the smaller of their log ends",
    report="After the final reads, two replicas hold different records at one offset below both log ends.",
    severity=3,
    source="replicas",
    evidence="presence",
    example_fields=("topic", "partition", "offset", "below_high_watermarks", "replicas"),
    order=("topic", "partition", "offset"),
    counts="(topic, partition, offset) positions",
    occurrence="position",
    rule="among a partition's replicas whose `[log_start, log_end)` covers the offset, two hold different records there (a value, or none); a replica outside the final ISR (`cluster-state.json`) does not count at or above its own checkpointed HW (an unacknowledged tail it has still to truncate: said in `notes`)",
    example_text="topic, partition, offset, replicas [{node, value, log_end, high_watermark}], below_high_watermarks (true: committed data diverged; false: an uncommitted tail not yet truncated; null: an HW unknown)",
    row=ReplicaPosition,
    holds=holds,
)
