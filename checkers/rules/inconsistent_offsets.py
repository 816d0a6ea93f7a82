"""inconsistent-offsets: one topic-partition offset seen with two values, across acks and reads."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import Anomaly
from checkers.rules.rows import PositionValues, SightedPosition


def holds(c: Any, row: SightedPosition[Any]) -> Any:
    return row.several_values


RULE = Anomaly(
    name="inconsistent-offsets",
    description="one topic-partition offset seen with two values, across acks and reads",
    report="One topic-partition offset seen with two different values, across acks and reads.",
    severity=4,
    source="history",
    evidence="presence",
    example_fields=("index", "topic", "partition", "offset", "values"),
    order=("index", "topic", "partition", "offset"),
    counts="(topic, partition, offset) positions",
    occurrence="position",
    rule="sightings of two or more distinct values at one position",
    example_text="index (smallest), topic, partition, offset, values [{value, index, process}] sorted by value",
    row=SightedPosition,
    holds=holds,
    example_row=PositionValues,
)
