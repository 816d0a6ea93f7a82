"""duplicate: one value at two (topic, partition, offset) positions, across acks and reads."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import Anomaly, Verdict
from checkers.rules.rows import SightedValue, ValuePositions


def holds(c: Any, row: SightedValue[Any]) -> Any:
    return row.several_positions


RULE = Anomaly(
    name="duplicate",
    description="one value at two (topic, partition, offset) positions, across acks and reads",
    report="One value stored at two offsets.",
    severity=10,
    source="history",
    evidence="presence",
    example_fields=("index", "value", "positions"),
    order=("index", "value"),
    counts="values",
    occurrence="value",
    rule="sightings of the value at two or more distinct positions",
    example_text="index (smallest), value, positions [{topic, partition, offset, index, process}] sorted by position",
    row=SightedValue,
    holds=holds,
    example_row=ValuePositions,
    verdict=(
        Verdict(
            "allowed",
            "without-idempotence",
            "a producer that retries without idempotence may write one value twice",
        ),
    ),
)
