"""nonmonotonic-send: a process's later ok send got an earlier offset on one partition."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import RECORD, Anomaly
from checkers.rules.rows import LinkedAck


def holds(c: Any, row: LinkedAck[Any]) -> Any:
    return c.lt(row.offset, row.prev_offset)


RULE = Anomaly(
    name="nonmonotonic-send",
    description="a process's later ok send got an earlier offset on one partition",
    report="A process's later send got an earlier offset on one partition.",
    severity=11,
    source="history",
    evidence="presence",
    example_fields=(*RECORD, "prev_index", "prev_offset", "prev_value"),
    order=("index",),
    counts="consecutive ok-send pairs",
    occurrence="pair of acks",
    rule="a process's ack on tp has a smaller offset than its previous ack on tp",
    example_text="index, process, topic, partition, offset, value, prev_index, prev_offset, prev_value",
    row=LinkedAck,
    holds=holds,
)
