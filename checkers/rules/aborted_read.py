"""aborted-read: a value whose every send failed was read."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import RECORD, Anomaly
from checkers.rules.rows import FirstRead, SightedValue


def holds(c: Any, row: SightedValue[Any]) -> Any:
    return c.and_(c.and_(row.read, row.sent_fail), c.not_(c.or_(row.sent_info, row.sent_ok)))


RULE = Anomaly(
    name="aborted-read",
    description="a value whose every send failed was read",
    report="A value whose send failed was read.",
    severity=5,
    source="history",
    evidence="presence",
    example_fields=(*RECORD, "send_index", "send_process"),
    order=("index", "value"),
    counts="values",
    occurrence="value",
    rule="a read value whose status is fail",
    example_text="index, process, topic, partition, offset (its first read: smallest poll index, then first in the list), value, send_index, send_process (its first failed send's completion)",
    row=SightedValue,
    holds=holds,
    example_row=FirstRead,
)
