"""torn-transaction: a committed transaction of which some writes were read and some are lost: read past and never returned."""

from __future__ import annotations

from typing import Any

from checkers.rules.record import Anomaly, Verdict
from checkers.rules.rows import Transaction


def holds(c: Any, row: Transaction[Any]) -> Any:
    return c.and_(
        c.eq(row.outcome, c.lit("ok")), c.and_(c.lt(c.lit(0), row.n_visible), c.lt(c.lit(0), row.n_lost))
    )


RULE = Anomaly(
    name="torn-transaction",
    description="a committed transaction of which some writes were read and some are lost: read past and never returned",
    report="A committed transaction that reached the log only in part: some of its writes were read, others lost.",
    severity=2,
    source="history",
    evidence="absence",
    example_fields=("index", "process", "visible", "lost"),
    order=("index",),
    counts="ok transactions",
    occurrence="`ok` transaction",
    rule="some of its sends were read (anywhere) and some of its acknowledged sends are `lost-write`s: the transaction reached the log only in part",
    example_text="index, process, visible, lost (values, sorted)",
    row=Transaction,
    holds=holds,
    verdict=(
        Verdict(
            "unknown",
            "drain-not-known-complete",
            "its lost part is lost-write's claim, which needs a completed final drain",
        ),
    ),
)
