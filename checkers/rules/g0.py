"""G0: a write cycle: transactions whose records follow each other around a cycle in the partitions' orders."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import CYCLE, Anomaly, Verdict
from checkers.rules.rows import Component, Cycle


def holds(c: Any, row: Component[Any]) -> Any:
    return c.eq(row.graph, c.lit("ww"))


RULE = Anomaly(
    name="G0",
    description="a write cycle: transactions whose records follow each other around a cycle in the partitions' orders",
    report="A write cycle: transactions whose records follow each other around a cycle on the partitions.",
    severity=14,
    source="history",
    evidence="presence",
    example_fields=CYCLE,
    order=("index",),
    counts="strongly connected components of ww edges",
    occurrence="strongly connected component of ww edges",
    rule="a write cycle: transactions whose records follow each other around a cycle in the partitions' orders",
    example_text="index (its smallest transaction), size, cycle, steps",
    row=Component,
    holds=holds,
    example_row=Cycle,
    verdict=(
        Verdict(
            "allowed",
            "always",
            "Kafka does not isolate transactions' writes: two transactions may interleave their records on two partitions in opposite orders",
        ),
    ),
)
