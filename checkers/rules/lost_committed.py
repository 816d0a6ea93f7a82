"""lost-committed-on-replicas: an acknowledged record missing from the final log of the partition's leader."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import RECORD, Anomaly
from checkers.rules.rows import LeaderAck
from history import logs


def holds(c: Any, row: LeaderAck[Any]) -> Any:
    return logs.lost_committed(c, row.absent, row.held)


RULE = Anomaly(
    name="lost-committed-on-replicas",
    description="an acknowledged record missing from the final log of the partition's leader",
    report="An acknowledged record missing from the final log of the partition's leader.",
    severity=1,
    source="replicas",
    evidence="presence",
    example_fields=(*RECORD, "leader", "leader_log_end", "leader_known"),
    order=("index",),
    counts="ok send operations",
    occurrence="ack (as defined in Terms: paired with its invocation)",
    rule="the acked value is nowhere in the final log of the partition's leader, whose log starts at or below the acked offset",
    example_text="index, process, topic, partition, offset, value, leader, leader_log_end, leader_known",
    row=LeaderAck,
    holds=holds,
)
