"""group-skip: a value in the partition's log, below an offset its group committed, that no member of that group returned."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import COMMIT, Anomaly
from checkers.rules.rows import FinalPosition


def holds(c: Any, row: FinalPosition[Any]) -> Any:
    return c.and_(c.not_(c.is_null(row.committed_offset)), c.not_(row.returned))


RULE = Anomaly(
    name="group-skip",
    description="a value in the partition's log, below an offset its group committed, that no member of that group returned",
    report="a value in the partition's log, below an offset its group committed, that no member of that group returned",
    severity=15,
    source="history",
    evidence="absence",
    example_fields=(*COMMIT, "value", "committed_offset", "read_index", "read_process"),
    order=("index", "topic", "partition", "offset"),
    counts="(group, topic, partition, offset) positions",
    occurrence="(group, position)",
    rule="a position (tp, o) of the partition's final log holding value v (what the final drain read there: the reads of the processes whose `assign` is marked `final: true`; in a history without them, the first read of the position by any process), below an offset that an `ok` commit of group G made on tp (`o < offset`), where no member of G ever returned v",
    example_text="index, process, committed_offset (the first commit of G, by completion index, past o), group, topic, partition, offset, value, read_index, read_process (the position's read in the final log)",
    row=FinalPosition,
    holds=holds,
)
