"""G1c: circular information flow: a cycle of write-read (and write-write) dependencies between transactions."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import CYCLE, Anomaly, Verdict
from checkers.rules.rows import Component, Cycle


def holds(c: Any, row: Component[Any]) -> Any:
    return c.and_(c.eq(row.graph, c.lit("all")), c.lt(c.lit(0), row.wr_edges))


RULE = Anomaly(
    name="G1c",
    description="circular information flow: a cycle of write-read (and write-write) dependencies between transactions",
    report="Circular information flow: transactions that, through what they read and wrote, each came before the other.",
    severity=7,
    source="history",
    evidence="presence",
    example_fields=(*CYCLE, "wr_only"),
    order=("index",),
    counts="strongly connected components of ww and wr edges holding a wr edge",
    occurrence="strongly connected component of ww and wr edges holding a wr edge",
    rule="circular information flow; `wr_only` counts the components holding a cycle of wr edges alone",
    example_text="index, size, cycle, steps, wr_only",
    row=Component,
    holds=holds,
    example_row=Cycle,
    verdict=(
        Verdict(
            "allowed",
            "no-wr-only-cycle",
            "every cycle found needs a ww edge, which Kafka's missing write isolation allows (a transaction may read one that committed after it wrote); a cycle of wr edges alone would be invalid",
        ),
    ),
)
