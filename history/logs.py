"""Replica logs compared: what log-divergence and lost-committed-on-replicas look at, written once
for the checkers (`checkers/rules/`, over the collected data dirs) and the simulation
(`explore.simulation`, over its brokers' logs), which both import it from here, below them.

A log is what a replica holds: offset -> record value (a mapping, or a sequence from offset 0);
`ABSENT` stands for no record at an offset (none there, or outside the log).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from history.columns import Columns, E

ABSENT = object()
Log = Mapping[int, Any] | Sequence[Any]


def record_at(log: Log, offset: int) -> Any:
    """The record a log holds at an offset, or ABSENT."""
    if isinstance(log, Mapping):
        return log.get(offset, ABSENT)
    return log[offset] if 0 <= offset < len(log) else ABSENT


def differ(records: Iterable[Any]) -> bool:
    """Two of these records (at one offset, of the replicas that cover it) are different; no record
    (ABSENT, or a record without a value) is different from any value."""
    first: Any = ABSENT
    seen = False
    for record in records:
        if not seen:
            first, seen = record, True
        elif record is not first and record != first:
            return True
    return False


def first_divergence(a: Log, b: Log, end: int) -> int | None:
    """The first offset below `end` at which two logs differ, or None."""
    for offset in range(end):
        if differ((record_at(a, offset), record_at(b, offset))):
            return offset
    return None


def absent_at(log: Log, offset: int, value: Any, log_start: int = 0) -> bool:
    """An acknowledged record is absent from a log: at its offset, at or past the log's start, the
    log holds no record or another value."""
    return offset >= log_start and record_at(log, offset) != value


def lost_committed(c: Columns[E], absent: E, held: E) -> E:
    """lost-committed-on-replicas' rule: an acknowledged record is `absent` from the partition
    leader's final log (`absent_at`) and its value is not `held` anywhere in that log."""
    return c.and_(absent, c.not_(held))


def log_divergence(c: Columns[E], covering: E, differ: E, differ_settled: E) -> E:
    """log-divergence's rule at one offset: two or more replicas cover it and two of them hold
    different records there (`differ`), also among those that are not a pending tail
    (`differ_settled`: a replica outside the final ISR, at or above its own checkpointed HW, has
    records it has still to truncate)."""
    return c.and_(c.le(c.lit(2), covering), c.and_(differ, differ_settled))
