"""phantom: a read value that no send ever carried."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import RECORD, Anomaly
from checkers.rules.rows import FirstRead, SightedValue


def holds(c: Any, row: SightedValue[Any]) -> Any:
    return c.and_(row.read, c.not_(c.or_(row.sent_fail, c.or_(row.sent_info, row.sent_ok))))


RULE = Anomaly(
    name="phantom",
    description="a read value that no send ever carried",
    report="A read value that no send ever carried.",
    severity=8,
    source="history",
    evidence="absence",
    example_fields=RECORD,
    order=("index", "value"),
    counts="values",
    occurrence="value",
    rule="a read value that no send invocation carried",
    example_text="index, process, topic, partition, offset (its first read), value",
    row=SightedValue,
    holds=holds,
    example_row=FirstRead,
)
