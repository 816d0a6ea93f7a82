"""The anomaly catalogue and the EngineResult shape shared by the reference and Spark engines.

Both engines (`checkers.reference`, `checkers.spark`) return an `EngineResult` over exactly the
names below, with examples of exactly the fields listed in `Anomaly.example_fields`, chosen by the
same rule (the `MAX_EXAMPLES` smallest by `Anomaly.order`), so the two can be compared with `==`.
The precise rule of each anomaly is in `checkers/reference.py` (module docstring) and
docs/checkers.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

MAX_EXAMPLES = 20

Source = Literal["history", "replicas"]
# "presence": the history lines that show it cannot be undone by lines the history lacks (a torn
# tail); "absence": it claims something never happened, so a missing line could refute it.
Evidence = Literal["presence", "absence"]
# A place in a partition's log: where acks, reads and commits are compared.
POSITION = ("topic", "partition", "offset")
# Where a record was acknowledged or read: the fields most examples start with.
RECORD = ("index", "process", *POSITION, "value")
# Where a group committed an offset: the fields the group anomalies' examples start with.
COMMIT = ("index", "process", "group", *POSITION)


def example_start(fields: tuple[str, ...], *values: Any) -> dict[str, Any]:
    """An example's leading fields (RECORD or COMMIT) in their order; the engine adds its anomaly's own."""
    return dict(zip(fields, values, strict=True))


@dataclass(frozen=True)
class Anomaly:
    """One anomaly kind: its name (Jepsen's where Jepsen has one) and what an example names."""

    name: str
    description: str
    source: Source
    evidence: Evidence
    example_fields: tuple[str, ...]
    # Examples are sorted by these fields (ascending) and the first MAX_EXAMPLES kept.
    order: tuple[str, ...]
    # What one counted occurrence is.
    counts: str


ANOMALIES: tuple[Anomaly, ...] = (
    Anomaly(
        "lost-write",
        "an acknowledged send that no read ever returned although reads reached past its offset",
        "history",
        "absence",
        (
            "index",
            "invoke_index",
            "process",
            "topic",
            "partition",
            "offset",
            "value",
            "max_read_offset",
            "max_read_index",
        ),
        ("index",),
        "ok send operations",
    ),
    Anomaly(
        "unseen",
        "acknowledged, never read, and no read reached past its offset: loss or delay",
        "history",
        "absence",
        ("index", "invoke_index", "process", "topic", "partition", "offset", "value", "max_read_offset"),
        ("index",),
        "ok send operations",
    ),
    Anomaly(
        "duplicate",
        "one value at two (topic, partition, offset) positions, across acks and reads",
        "history",
        "presence",
        ("index", "value", "positions"),
        ("index", "value"),
        "values",
    ),
    Anomaly(
        "inconsistent-offsets",
        "one topic-partition offset seen with two values, across acks and reads",
        "history",
        "presence",
        ("index", "topic", "partition", "offset", "values"),
        ("index", "topic", "partition", "offset"),
        "(topic, partition, offset) positions",
    ),
    Anomaly(
        "aborted-read",
        "a value whose every send failed was read",
        "history",
        "presence",
        (*RECORD, "send_index", "send_process"),
        ("index", "value"),
        "values",
    ),
    Anomaly(
        "phantom",
        "a read value that no send ever carried",
        "history",
        "absence",
        RECORD,
        ("index", "value"),
        "values",
    ),
    Anomaly(
        "poll-skip",
        "a process's successive polls of a partition skip offsets, with no assign between",
        "history",
        "presence",
        ("index", "process", "topic", "partition", "offset", "prev_offset", "prev_index", "skipped"),
        ("index", "topic", "partition", "offset", "prev_offset", "prev_index"),
        "consecutive read pairs",
    ),
    Anomaly(
        "nonmonotonic-poll",
        "a process's successive polls of a partition go back (or repeat), with no assign between",
        "history",
        "presence",
        ("index", "process", "topic", "partition", "offset", "prev_offset", "prev_index"),
        ("index", "topic", "partition", "offset", "prev_offset", "prev_index"),
        "consecutive read pairs",
    ),
    Anomaly(
        "nonmonotonic-send",
        "a process's later ok send got an earlier offset on one partition",
        "history",
        "presence",
        (
            *RECORD,
            "prev_index",
            "prev_offset",
            "prev_value",
        ),
        ("index",),
        "consecutive ok-send pairs",
    ),
    Anomaly(
        "group-skip",
        "a value in the partition's log, below an offset its group committed, that no member of that group returned",
        "history",
        "absence",
        (*COMMIT, "value", "committed_offset", "read_index", "read_process"),
        ("index", "topic", "partition", "offset"),
        "(group, topic, partition, offset) positions",
    ),
    Anomaly(
        "nonmonotonic-commit",
        "a group's committed offset for a partition goes back: a commit lower than one acknowledged before it began",
        "history",
        "presence",
        (*COMMIT, "prev_index", "prev_offset"),
        ("index", "topic", "partition"),
        "(ok commit, partition) pairs",
    ),
    Anomaly(
        "precommitted-read",
        "a transaction polled a record of a partition at or past an offset it had itself written there"
        " (its own uncommitted write, or a record beyond it: read_committed shows neither)",
        "history",
        "presence",
        ("index", "process", "topic", "partition", "offset", "value", "write_offset", "write_value"),
        ("index",),
        "transactions",
    ),
    Anomaly(
        "torn-transaction",
        "a committed transaction of which some writes were read and some are lost: read past and never returned",
        "history",
        "absence",
        ("index", "process", "visible", "lost"),
        ("index",),
        "ok transactions",
    ),
    Anomaly(
        "G0",
        "a write cycle: transactions whose records follow each other around a cycle in the partitions' orders",
        "history",
        "presence",
        ("index", "size", "cycle", "steps"),
        ("index",),
        "strongly connected components of ww edges",
    ),
    Anomaly(
        "G1c",
        "circular information flow: a cycle of write-read (and write-write) dependencies between transactions",
        "history",
        "presence",
        ("index", "size", "cycle", "steps", "wr_only"),
        ("index",),
        "strongly connected components of ww and wr edges holding a wr edge",
    ),
    Anomaly(
        "log-divergence",
        "after the final reads, two replicas hold different records at one offset below the smaller of their log ends",
        "replicas",
        "presence",
        ("topic", "partition", "offset", "replicas", "below_high_watermarks"),
        ("topic", "partition", "offset"),
        "(topic, partition, offset) positions",
    ),
    Anomaly(
        "lost-committed-on-replicas",
        "an acknowledged record missing from the final log of the partition's leader",
        "replicas",
        "presence",
        (
            *RECORD,
            "leader",
            "leader_log_end",
            "leader_known",
        ),
        ("index",),
        "ok send operations",
    ),
)

BY_NAME: dict[str, Anomaly] = {a.name: a for a in ANOMALIES}
NAMES: tuple[str, ...] = tuple(a.name for a in ANOMALIES)
HISTORY_ANOMALIES: tuple[str, ...] = tuple(a.name for a in ANOMALIES if a.source == "history")
REPLICA_ANOMALIES: tuple[str, ...] = tuple(a.name for a in ANOMALIES if a.source == "replicas")


# The anomalies whose results also count the occurrences of group members (`members`).
MEMBER_COUNTED = ("poll-skip", "nonmonotonic-poll")


class AnomalyResult(TypedDict):
    count: int
    examples: list[dict[str, Any]]
    # poll-skip and nonmonotonic-poll only: how many of the `count` occurrences are reads of a
    # consumer-group member (the verdict allows those, and only those; checkers/verdict.py).
    members: NotRequired[int]
    # G1c only: how many of the `count` components hold a cycle of wr edges alone, which
    # read_committed consumers cannot produce (the verdict allows the others; checkers/txn_graph.py).
    wr_only: NotRequired[int]


class OutcomeCounts(TypedDict):
    """Operations of one f by how they completed; `open` never completed (history cut short)."""

    ok: int
    fail: int
    info: int
    open: int


class EngineStats(TypedDict):
    """What both engines count while checking (stats.py adds time-based figures)."""

    ops: int  # history lines read as ops (client and nemesis)
    sends: OutcomeCounts
    polls: OutcomeCounts
    assigns: OutcomeCounts
    records_read: int  # records in ok polls and in transactions' polls
    acked: int  # ok sends with an offset, and committed transactions' sends with one (judged for lost-write / unseen)
    txns: OutcomeCounts  # transactions by how they completed
    # lost-write sends by the second (floor(time_ns / 1e9) of the ok completion, as a string key):
    # stats.py attributes them to fault windows.
    lost_by_second: dict[str, int]


class EngineResult(TypedDict):
    anomalies: dict[str, AnomalyResult]  # every name of HISTORY_ANOMALIES, count 0 included
    stats: EngineStats
    incomplete: list[str]  # why the history cannot be trusted whole; empty when it can


def empty_counts() -> OutcomeCounts:
    return {"ok": 0, "fail": 0, "info": 0, "open": 0}


def empty_stats() -> EngineStats:
    return {
        "ops": 0,
        "sends": empty_counts(),
        "polls": empty_counts(),
        "assigns": empty_counts(),
        "records_read": 0,
        "acked": 0,
        "txns": empty_counts(),
        "lost_by_second": {},
    }


def example_key(name: str, example: dict[str, Any]) -> tuple[Any, ...]:
    """The sort key of an example: the catalogue's `order` fields."""
    return tuple(example[f] for f in BY_NAME[name].order)


def select_examples(name: str, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deterministic selection both engines apply: the MAX_EXAMPLES smallest by `order`."""
    return sorted(examples, key=lambda e: example_key(name, e))[:MAX_EXAMPLES]


# Why a history cannot be trusted whole. Each `incomplete` reason starts with one of these kinds and
# a colon ("torn-tail: ..."). "truncated" kinds only lose the end of the history (so what the
# history shows stays shown); "damaged" kinds lose or garble lines in the middle.
TRUNCATED_KINDS: tuple[str, ...] = ("torn-tail", "open-invocation", "drain", "empty")
DAMAGED_KINDS: tuple[str, ...] = ("malformed-line", "malformed-op", "unpaired")


def incomplete_kind(reason: str) -> str:
    """The kind of an `incomplete` reason (the text before the first colon)."""
    return reason.split(":", 1)[0].strip()


def is_damaged(reasons: list[str]) -> bool:
    """True when some reason says lines in the middle are missing or garbled (not only the end)."""
    return any(incomplete_kind(r) not in TRUNCATED_KINDS for r in reasons)
