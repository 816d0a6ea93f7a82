"""nonmonotonic-poll: a process's successive polls of a partition go back (or repeat), with no assign between."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import LINKED_ORDER, LINKED_READ, Anomaly, Verdict
from checkers.rules.rows import LinkedRead


def holds(c: Any, row: LinkedRead[Any]) -> Any:
    return c.le(row.offset, row.prev_offset)


RULE = Anomaly(
    name="nonmonotonic-poll",
    description="a process's successive polls of a partition go back (or repeat), with no assign between",
    report="A process's successive polls of a partition went back, with no assign between.",
    severity=12,
    source="history",
    evidence="presence",
    example_fields=LINKED_READ,
    order=LINKED_ORDER,
    counts="consecutive read pairs",
    occurrence="pair of reads",
    rule="as poll-skip, with `o <= prev_offset` (going back, or the same offset again); `members` as for poll-skip",
    example_text="index, process, topic, partition, offset, prev_offset, prev_index",
    row=LinkedRead,
    holds=holds,
    verdict=(
        Verdict(
            "allowed",
            "only-group-members",
            "after a rebalance a group member resumes from the last committed offset and reads again",
        ),
    ),
    member_counted=True,
)
