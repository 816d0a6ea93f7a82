"""poll-skip: a process's successive polls of a partition skip offsets, with no assign between."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import LINKED_ORDER, LINKED_READ, Anomaly, Verdict
from checkers.rules.rows import LinkedRead


def holds(c: Any, row: LinkedRead[Any]) -> Any:
    return c.lt(c.lit(0), row.skipped)


RULE = Anomaly(
    name="poll-skip",
    description="a process's successive polls of a partition skip offsets, with no assign between",
    report="A process's successive polls of a partition skipped offsets, with no assign between.",
    severity=13,
    source="history",
    evidence="presence",
    example_fields=(*LINKED_READ, "skipped"),
    order=LINKED_ORDER,
    counts="consecutive read pairs",
    occurrence="pair of reads",
    rule="a process's read of tp at offset o follows its previous read of tp at `prev_offset` with `o > prev_offset + 1`; `members` counts those whose process was a group member (it had invoked `subscribe`)",
    example_text="index, process, topic, partition, offset, prev_offset, prev_index, skipped (= o - prev_offset - 1)",
    row=LinkedRead,
    holds=holds,
    verdict=(
        Verdict(
            "allowed",
            "only-group-members",
            "a rebalance hands a partition to another consumer, so a group member's reads skip",
        ),
    ),
    member_counted=True,
)
