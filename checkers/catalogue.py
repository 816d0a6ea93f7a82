"""The anomaly catalogue and the EngineResult shape shared by the reference and Spark engines.

The anomalies are declared one module each under `checkers/rules/` (record, rule in prose,
classification); this module lists them for the engines. Both engines (`checkers.reference`,
`checkers.spark`) return an `EngineResult` over exactly these names, with examples of exactly the
fields listed in `Anomaly.example_fields`, chosen by the same rule (the `MAX_EXAMPLES` smallest by
`Anomaly.order`), so the two can be compared with `==`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from checkers.rules import ANOMALIES
from checkers.rules.record import COMMIT, POSITION, RECORD, Anomaly, example_start

__all__ = ["ANOMALIES", "COMMIT", "POSITION", "RECORD", "Anomaly", "example_start"]

MAX_EXAMPLES = 20

BY_NAME: dict[str, Anomaly] = {a.name: a for a in ANOMALIES}
NAMES: tuple[str, ...] = tuple(a.name for a in ANOMALIES)
HISTORY_ANOMALIES: tuple[str, ...] = tuple(a.name for a in ANOMALIES if a.source == "history")
REPLICA_ANOMALIES: tuple[str, ...] = tuple(a.name for a in ANOMALIES if a.source == "replicas")


# The anomalies whose results also count the occurrences of group members (`members`).
MEMBER_COUNTED = tuple(a.name for a in ANOMALIES if a.member_counted)


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
