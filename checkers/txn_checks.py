"""The reference checker's transaction rules, in plain Python (docs/checkers.md, "Transactions").

The value and position rules (aborted-read, lost-write, unseen, duplicate, inconsistent-offsets,
phantom) treat a transaction's sends and polls as they treat single ones (`checkers.reference`);
what only transactions have is judged here, from each transaction's writes and reads:

* **precommitted-read** (per transaction): it polled, on a partition, a record at an offset at or
  past one where it had itself written (with an offset known): its own uncommitted write, or a
  record beyond it, neither of which a read_committed consumer is shown while the transaction is
  open. Example: the smallest such (topic, partition, offset) read, its value, and the
  transaction's smallest write offset there (`write_offset`, `write_value`).
* **torn-transaction** (per committed transaction): some of its writes were read (anywhere) and
  some of its acknowledged writes are lost-writes (never read although reads passed their
  offset). Example: the values read (`visible`) and the ones lost (`lost`), sorted.
* **G0** and **G1c**: the dependency edges below, whose cycles `checkers.txn_graph` finds.

A transaction's `index` is its completion's index, or its invocation's when it never completed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.catalogue import AnomalyResult
from checkers.classify import Examples, classify
from checkers.rules.rows import Transaction, TxnRead
from checkers.txn_graph import Edge, cycles
from history.txn import TxnWrite

TopicPartition = tuple[str, int]
Position = tuple[str, int, int]
Read = tuple[str, int, int, int]  # topic, partition, offset, value


@dataclass
class TxnRecord:
    """One transaction as the checker saw it: what it wrote and what it read (topic, partition,
    offset, value), in order."""

    index: int
    process: Any
    outcome: str  # ok, fail, info, open
    writes: list[TxnWrite]
    reads: list[Read] = field(default_factory=list)

    @property
    def in_graph(self) -> bool:
        """Committed, or may have: a node of the dependency graph."""
        return self.outcome != "fail"


def precommitted_reads(txns: Iterable[TxnRecord]) -> AnomalyResult:
    """The transactions for which a `TxnRead` rule holds (one occurrence each: its smallest read)."""
    found = {"precommitted-read": Examples("precommitted-read")}
    for txn in txns:
        own: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (smallest write offset, its value)
        for w in txn.writes:
            if w.offset is not None and (
                (w.topic, w.partition) not in own or w.offset < own[(w.topic, w.partition)][0]
            ):
                own[(w.topic, w.partition)] = (w.offset, w.value)
        for topic, partition, offset, value in sorted(txn.reads):
            if (topic, partition) in own:
                write_offset, write_value = own[(topic, partition)]
                row = TxnRead(
                    txn.index, txn.process, topic, partition, offset, value, write_offset, write_value
                )
                if classify(found, TxnRead, row):
                    break
    return found["precommitted-read"].result()


def torn_transactions(
    txns: Iterable[TxnRecord], read_values: set[int], lost_values: set[int]
) -> AnomalyResult:
    found = {"torn-transaction": Examples("torn-transaction")}
    for txn in txns:
        values = [w.value for w in txn.writes]
        visible = sorted(v for v in values if v in read_values)
        lost = sorted(v for v in values if v in lost_values)
        classify(
            found,
            Transaction,
            Transaction(txn.index, txn.process, txn.outcome, visible, lost, len(visible), len(lost)),
        )
    return found["torn-transaction"].result()


def edges(txns: list[TxnRecord], position_value: Mapping[Position, int]) -> list[Edge]:
    """The ww and wr edges between the graph's transactions (checkers.txn_graph)."""
    writer: dict[int, int] = {}
    for txn in txns:
        if txn.in_graph:
            for w in txn.writes:
                if w.value not in writer or txn.index < writer[w.value]:
                    writer[w.value] = txn.index
    by_tp: dict[TopicPartition, list[tuple[int, int]]] = defaultdict(list)
    for (topic, partition, offset), value in position_value.items():
        if value in writer:
            by_tp[(topic, partition)].append((offset, value))
    out = []
    for (topic, partition), order in by_tp.items():
        order.sort()
        for (offset, value), (next_offset, next_value) in zip(order, order[1:], strict=False):
            out.append(
                Edge(
                    writer[value],
                    writer[next_value],
                    "ww",
                    topic,
                    partition,
                    offset,
                    value,
                    next_offset,
                    next_value,
                )
            )
    for txn in txns:
        if txn.in_graph:
            for topic, partition, offset, value in txn.reads:
                if value in writer:
                    out.append(Edge(writer[value], txn.index, "wr", topic, partition, offset, value))
    return out


def judge(
    txns: list[TxnRecord],
    read_values: set[int],
    lost_values: set[int],
    position_value: Mapping[Position, int],
) -> dict[str, AnomalyResult]:
    """The anomalies only transactions have: precommitted-read, torn-transaction, G0, G1c."""
    return {
        "precommitted-read": precommitted_reads(txns),
        "torn-transaction": torn_transactions(txns, read_values, lost_values),
        **cycles(edges(txns, position_value)),
    }
