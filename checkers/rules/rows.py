"""The kinds of row an anomaly's rule classifies, each field's meaning said once.

Every engine builds the rows of a kind its own way (the reference in one pass over the history,
Spark with joins and groupings over the Parquet form) and hands them, field by field, to the rules
of that kind (`Anomaly.holds` and `Anomaly.example_of`); a field is a plain value for the reference
and a column for Spark. Terms (docs/checkers.md, "Terms"): an *ack* is an `ok` send with an offset
>= 0; a *read* is one record of an `ok` poll; a *sighting* of a value at a position is an ack or a
read of it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

E = TypeVar("E")


@dataclass(frozen=True)
class NeverReadAck(Generic[E]):
    """An ack whose value no read returned (at any position), with the largest offset read of its
    partition (`max_read_offset`, null when none was read) and the smallest poll index that read
    it (`max_read_index`). `index` is the ack's completion, `invoke_index` its invocation."""

    index: E
    invoke_index: E
    process: E
    topic: E
    partition: E
    offset: E
    value: E
    max_read_offset: E
    max_read_index: E


@dataclass(frozen=True)
class SightedValue(Generic[E]):
    """A value, with what happened to it: read (some read returned it), and whether some send that
    carried it ended `fail`, `info` (or never completed) or `ok` (its status is the best of
    these); `several_positions`: it was sighted at two or more positions."""

    read: E
    sent_fail: E
    sent_info: E
    sent_ok: E
    several_positions: E


@dataclass(frozen=True)
class SightedPosition(Generic[E]):
    """A position (topic, partition, offset); `several_values`: two or more distinct values were
    sighted there."""

    several_values: E


@dataclass(frozen=True)
class LinkedRead(Generic[E]):
    """A read (by a single poll: the poll's completion `index` and `process`) linked to its
    process's previous read of the same partition (`prev_offset`, `prev_index`), unless the
    process's position was forgotten between them (an `assign` invocation, a poll that completed
    `info` or stayed open). `skipped`: the records between the two, `offset - prev_offset - 1`;
    in a history with transactions, the offsets strictly between them at which some record was
    sighted (markers and aborted records leave gaps no consumer sees)."""

    index: E
    process: E
    topic: E
    partition: E
    offset: E
    prev_offset: E
    prev_index: E
    skipped: E


@dataclass(frozen=True)
class LinkedAck(Generic[E]):
    """An ack linked to its process's previous ack on the same partition (`prev_index`,
    `prev_offset`, `prev_value`)."""

    index: E
    process: E
    topic: E
    partition: E
    offset: E
    value: E
    prev_index: E
    prev_offset: E
    prev_value: E


@dataclass(frozen=True)
class CommitFloor(Generic[E]):
    """An `ok` commit of group `group` on one partition (its completion `index`, its `offset`),
    with the greatest offset that group committed there in an `ok` commit completed before this
    one was invoked (`prev_offset`, and the first commit to reach it: `prev_index`)."""

    index: E
    process: E
    group: E
    topic: E
    partition: E
    offset: E
    prev_index: E
    prev_offset: E


@dataclass(frozen=True)
class FinalPosition(Generic[E]):
    """A position of a partition's final log (what the final drain read there, `value`, by
    `read_index`/`read_process`) against a group that committed that partition: the group's first
    `ok` commit (by completion: `index`, `process`) whose offset is past the position
    (`committed_offset`, null when none is); `returned`: some member of the group returned the
    value."""

    index: E
    process: E
    group: E
    topic: E
    partition: E
    offset: E
    value: E
    committed_offset: E
    read_index: E
    read_process: E
    returned: E


@dataclass(frozen=True)
class TxnRead(Generic[E]):
    """A transaction's read of a partition it wrote to, against its smallest write there
    (`write_offset`, `write_value`); `index` is the transaction's. One transaction counts once: by
    the smallest (topic, partition, offset, value) of its reads a rule holds for."""

    index: E
    process: E
    topic: E
    partition: E
    offset: E
    value: E
    write_offset: E
    write_value: E


@dataclass(frozen=True)
class Transaction(Generic[E]):
    """A transaction (`index`: its completion's, or its invocation's when it never completed), its
    outcome, and of its sends the values read anywhere (`visible`, sorted) and those that are
    `lost-write`s (`lost`); `n_visible`, `n_lost` count them."""

    index: E
    process: E
    outcome: E
    visible: Any
    lost: Any
    n_visible: E
    n_lost: E


@dataclass(frozen=True)
class Component(Generic[E]):
    """A strongly connected component (two or more transactions) of a dependency graph
    (`checkers.txn_graph`): `graph` is "ww" (write-write edges alone) or "all" (ww and wr);
    `wr_edges` counts its wr edges; `wr_only`: it holds a cycle of wr edges alone. `index` is its
    smallest transaction."""

    index: E
    size: E
    graph: E
    wr_edges: E
    wr_only: E


@dataclass(frozen=True)
class ReplicaPosition(Generic[E]):
    """An offset of a partition: `covering` replicas hold it within their log bounds;
    `differ`: two of those hold different records there (a value, or none); `differ_settled`: two
    differ among those that are not a pending tail (a replica outside the final ISR, at or above
    its own checkpointed HW: records it has still to truncate)."""

    topic: E
    partition: E
    offset: E
    covering: E
    differ: E
    differ_settled: E
    replicas: Any
    below_high_watermarks: E


@dataclass(frozen=True)
class LeaderAck(Generic[E]):
    """An ack against its partition's final leader log (the named leader's replica, else the
    longest log): `absent` the log does not hold the acked value at the acked offset, which is at
    or past the log's start (`history.logs.absent_at`); `held`: the log holds the value at some
    offset."""

    index: E
    process: E
    topic: E
    partition: E
    offset: E
    value: E
    leader: E
    leader_log_end: E
    leader_known: E
    absent: E
    held: E


# --- example rows: what an example is drawn from when it is not the classified row itself ------


@dataclass(frozen=True)
class FirstRead(Generic[E]):
    """A value's first read (smallest poll index, then first in the poll's list) and its first
    failed send's completion (`send_index`, `send_process`; null when no send of it failed)."""

    index: E
    process: E
    topic: E
    partition: E
    offset: E
    value: E
    send_index: E
    send_process: E


@dataclass(frozen=True)
class ValuePositions(Generic[E]):
    """A value and every position it was sighted at, each with its first sighting's index and
    process, sorted by position; `index` is the smallest of those."""

    index: E
    value: E
    positions: Any


@dataclass(frozen=True)
class PositionValues(Generic[E]):
    """A position and every value sighted there, each with its first sighting's index and process,
    sorted by value; `index` is the smallest of those."""

    index: E
    topic: E
    partition: E
    offset: E
    values: Any


@dataclass(frozen=True)
class Cycle(Generic[E]):
    """A component's example: a shortest `cycle` (through its smallest transaction for a ww
    component and for a wr-only cycle, else through its first wr edge) and the `steps` (edges)
    that make it up, each with the records that show it."""

    index: E
    size: E
    cycle: Any
    steps: Any
    wr_only: E
