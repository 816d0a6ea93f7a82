"""nonmonotonic-commit: a group's committed offset for a partition goes back: a commit lower than one acknowledged before it began."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import COMMIT, Anomaly
from checkers.rules.rows import CommitFloor


def holds(c: Any, row: CommitFloor[Any]) -> Any:
    return c.lt(row.offset, row.prev_offset)


RULE = Anomaly(
    name="nonmonotonic-commit",
    description="a group's committed offset for a partition goes back: a commit lower than one acknowledged before it began",
    report="a group's committed offset for a partition goes back: a commit lower than one acknowledged before it began",
    severity=15,
    source="history",
    evidence="presence",
    example_fields=(*COMMIT, "prev_index", "prev_offset"),
    order=("index", "topic", "partition"),
    counts="(ok commit, partition) pairs",
    occurrence="(commit, partition)",
    rule="an `ok` commit of group G on tp with an offset lower than that of an `ok` commit of G on tp that completed before this one was invoked",
    example_text="index (the later commit's completion), process, group, topic, partition, offset, prev_index, prev_offset (the greatest earlier commit; the first to reach it)",
    row=CommitFloor,
    holds=holds,
)
