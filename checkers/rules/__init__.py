"""The anomalies, one module each: its record (name, words, severity, example fields and order,
where the verdict allows it), its rule in prose (docs/checkers.md's table shows it, and the report
its words) and its classification of one row, written once against the column algebra of
`history.columns` so that both engines evaluate the same rule (`Anomaly.holds`).

Adding an anomaly is adding a module here (and its line in docs/checkers.md, which a test keeps
equal to `Anomaly.docs_line`): the engines evaluate every rule of a row kind they build
(`checkers.rules.rows`), the catalogue, the verdict and the report take it from `ANOMALIES`.
"""

from __future__ import annotations

from checkers.rules import (
    aborted_read,
    duplicate,
    g0,
    g1c,
    group_skip,
    inconsistent_offsets,
    log_divergence,
    lost_committed,
    lost_write,
    nonmonotonic_commit,
    nonmonotonic_poll,
    nonmonotonic_send,
    phantom,
    poll_skip,
    precommitted_read,
    torn_transaction,
    unseen,
)
from checkers.rules.record import Anomaly

# In the catalogue's order (results.json lists the anomalies so).
ANOMALIES: tuple[Anomaly, ...] = tuple(
    m.RULE
    for m in (
        lost_write,
        unseen,
        duplicate,
        inconsistent_offsets,
        aborted_read,
        phantom,
        poll_skip,
        nonmonotonic_poll,
        nonmonotonic_send,
        group_skip,
        nonmonotonic_commit,
        precommitted_read,
        torn_transaction,
        g0,
        g1c,
        log_divergence,
        lost_committed,
    )
)


def of_row(kind: type) -> tuple[Anomaly, ...]:
    """The anomalies whose rule classifies rows of this kind, in the catalogue's order."""
    return tuple(a for a in ANOMALIES if a.row is kind)
