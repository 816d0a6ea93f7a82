"""unseen: acknowledged, never read, and no read reached past its offset: loss or delay."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import NEVER_READ, Anomaly, Verdict
from checkers.rules.rows import NeverReadAck


def holds(c: Any, row: NeverReadAck[Any]) -> Any:
    return c.or_(c.is_null(row.max_read_offset), c.le(row.max_read_offset, row.offset))


RULE = Anomaly(
    name="unseen",
    description="acknowledged, never read, and no read reached past its offset: loss or delay",
    report="Acknowledged, never read, and no read reached its offset: lost or delayed.",
    severity=9,
    source="history",
    evidence="absence",
    example_fields=NEVER_READ,
    order=("index",),
    counts="ok send operations",
    occurrence="ack",
    rule="the acked value is never read and tp has no read or `max_read(tp) <=` the acked offset",
    example_text="index, invoke_index, process, topic, partition, offset, value, max_read_offset (or null)",
    row=NeverReadAck,
    holds=holds,
    verdict=(
        Verdict(
            "unknown",
            "drain-not-known-complete",
            "without a completed final drain an acknowledged record may simply not have been read yet",
        ),
    ),
)
