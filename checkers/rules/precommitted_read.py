"""precommitted-read: a transaction polled a record of a partition at or past an offset it had itself written there (its own uncommitted write, or a record beyond it: read_committed shows neither)."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import RECORD, Anomaly
from checkers.rules.rows import TxnRead


def holds(c: Any, row: TxnRead[Any]) -> Any:
    return c.le(row.write_offset, row.offset)


RULE = Anomaly(
    name="precommitted-read",
    description="a transaction polled a record of a partition at or past an offset it had itself written there (its own uncommitted write, or a record beyond it: read_committed shows neither)",
    report="A transaction read its own write (or past it) before it had committed.",
    severity=6,
    source="history",
    evidence="presence",
    example_fields=(*RECORD, "write_offset", "write_value"),
    order=("index",),
    counts="transactions",
    occurrence="transaction",
    rule="it polled, on a partition, a record at an offset at or past one where it had itself written (an offset it was acknowledged): its own uncommitted write, or a record beyond it, which read_committed never shows while the transaction is open",
    example_text="index, process, topic, partition, offset, value (the smallest such read), write_offset, write_value (its smallest write there)",
    row=TxnRead,
    holds=holds,
)
