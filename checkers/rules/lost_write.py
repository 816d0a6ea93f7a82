"""lost-write: an acknowledged send that no read ever returned although reads reached past its offset."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import NEVER_READ, Anomaly, Verdict
from checkers.rules.rows import NeverReadAck


def holds(c: Any, row: NeverReadAck[Any]) -> Any:
    return c.and_(c.not_(c.is_null(row.max_read_offset)), c.lt(row.offset, row.max_read_offset))


RULE = Anomaly(
    name="lost-write",
    description="an acknowledged send that no read ever returned although reads reached past its offset",
    report="An acknowledged send that no read ever returned, although reads reached past its offset.",
    severity=0,
    source="history",
    evidence="absence",
    example_fields=(*NEVER_READ, "max_read_index"),
    order=("index",),
    counts="ok send operations",
    occurrence="ack",
    rule="the acked value is never read (at any position) and `max_read(tp) >` the acked offset",
    example_text="index (ack), invoke_index, process, topic, partition, offset, value, max_read_offset, max_read_index",
    row=NeverReadAck,
    holds=holds,
    verdict=(
        Verdict(
            "unknown",
            "drain-not-known-complete",
            "without a completed final drain no read need have covered the offset (a consumer that crashed mid-poll resumes past records the history never saw)",
        ),
    ),
)
