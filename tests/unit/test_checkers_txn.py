"""The reference checker's transaction rules: planted histories judged exactly, the cycle search,
the verdict's rules for G0 and G1c, and transactional lines it must refuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.catalogue import EngineResult
from checkers.reference import check_history
from checkers.txn_graph import Edge, cycles
from checkers.verdict import decide
from foundation.config import TestConfig
from history.format import HistoryError
from history.reader import iter_ops
from tests.support.history_builder import write_history
from tests.support.txn_histories import TXN_PLANTABLE, TxnPlanted, generate_txn_ops

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def expected_counts(planted: TxnPlanted) -> dict[str, int]:
    counts = planted.counts()
    if "G1c-ww" in counts:
        counts["G1c"] = counts.get("G1c", 0) + counts.pop("G1c-ww")
    return counts


def assert_exactly_planted(result: EngineResult, planted: TxnPlanted) -> None:
    found = {n: a["count"] for n, a in result["anomalies"].items() if a["count"]}
    assert found == expected_counts(planted)
    wr_only = sum(1 for g in planted.anomalies.get("G1c", []) if g["wr_only"])
    assert result["anomalies"]["G1c"].get("wr_only") == wr_only
    for name, instances in planted.anomalies.items():
        examples = result["anomalies"]["G1c" if name == "G1c-ww" else name]["examples"]
        for instance in instances:
            assert any(all(e.get(k, v) == v for k, v in instance.items()) for e in examples), (name, instance)
    assert result["incomplete"] == []


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    transactions=st.integers(0, 60),
    partitions=st.integers(2, 3),
    plants=st.fixed_dictionaries({kind: st.integers(0, 2) for kind in TXN_PLANTABLE}),
)
def test_planted_transactional_anomalies_are_found_exactly(
    tmp_path: Path, seed: int, transactions: int, partitions: int, plants: dict[str, int]
) -> None:
    ops, planted = generate_txn_ops(seed, transactions, plants, partitions=partitions)
    path = tmp_path / f"h{seed}.jsonl"
    write_history(path, ops)
    result = check_history(path)
    assert_exactly_planted(result, planted)
    # every committed transaction counted (a lone transaction may be generated as failed)
    assert result["stats"]["txns"]["ok"] == sum(1 for op in ops if op["f"] == "txn" and op["type"] == "ok")


def edge(src: int, dst: int, kind: str, offset: int = 0) -> Edge:
    return Edge(src, dst, kind, "t0", 0, offset, offset, offset + 1 if kind == "ww" else None, None)


def test_cycles_write_cycles_are_g0_and_a_wr_only_cycle_is_counted() -> None:
    found = cycles(
        [
            edge(1, 2, "ww"), edge(2, 3, "ww"), edge(3, 1, "ww"),  # G0 (and no wr: not G1c)
            edge(10, 11, "ww"), edge(11, 10, "wr"),  # G1c through a ww edge
            edge(20, 21, "wr"), edge(21, 22, "wr"), edge(22, 20, "wr"), edge(21, 20, "ww"),  # wr-only
            edge(30, 31, "ww"), edge(31, 32, "wr"),  # no cycle
        ]
    )  # fmt: skip
    g0, g1c = found["G0"], found["G1c"]
    assert (g0["count"], [e["cycle"] for e in g0["examples"]]) == (1, [[1, 2, 3]])
    assert [s["type"] for s in g0["examples"][0]["steps"]] == ["ww", "ww", "ww"]
    assert (g1c["count"], g1c["wr_only"]) == (2, 1)
    through_ww, wr_only = g1c["examples"]
    assert (through_ww["cycle"], through_ww["wr_only"]) == ([11, 10], False)
    assert [s["type"] for s in through_ww["steps"]] == ["wr", "ww"]
    assert (wr_only["index"], wr_only["size"], wr_only["cycle"], wr_only["wr_only"]) == (
        20,
        3,
        [20, 21, 22],
        True,
    )
    assert {s["type"] for s in wr_only["steps"]} == {"wr"}


def test_cycles_example_is_a_shortest_cycle_through_the_smallest_transaction() -> None:
    # 1 -> 2 -> 3 -> 4 -> 1 and the shortcut 2 -> 1: the example is 1, 2
    found = cycles([edge(1, 2, "ww"), edge(2, 3, "ww"), edge(3, 4, "ww"), edge(4, 1, "ww"), edge(2, 1, "ww")])
    assert found["G0"]["examples"][0]["cycle"] == [1, 2] and found["G0"]["examples"][0]["size"] == 4


def verdict_of(result: dict[str, Any]) -> dict[str, Any]:
    from checkers.catalogue import empty_stats

    stats = empty_stats()
    stats["sends"]["ok"] = 1
    engine: EngineResult = {"anomalies": result, "stats": stats, "incomplete": []}
    return decide(engine, None, TestConfig(workload="txn"), {"complete": True}, replicas_unavailable="none")


def test_g0_and_g1c_through_ww_are_allowed_a_wr_only_cycle_is_not() -> None:
    allowed = verdict_of(
        {"G0": {"count": 3, "examples": []}, "G1c": {"count": 2, "examples": [], "wr_only": 0}}
    )
    assert allowed["valid"] is True
    assert (allowed["anomalies"]["G0"]["effect"], allowed["anomalies"]["G1c"]["effect"]) == (
        "allowed",
        "allowed",
    )
    invalid = verdict_of({"G1c": {"count": 2, "examples": [], "wr_only": 1}})
    assert invalid["valid"] is False and invalid["fatal"] == ["G1c"]
    assert invalid["anomalies"]["G1c"]["wr_only"] == 1


def txn_line(index: int, process: int, type_: str, mops: Any, **extra: Any) -> dict[str, Any]:
    line = {
        "index": index,
        "time": (index + 1) * 1000,
        "process": process,
        "type": type_,
        "f": "txn",
        **extra,
    }
    if mops is not None:
        line["mops"] = mops
    return line


def test_a_transaction_without_its_micro_operations_is_refused_with_its_line_number(tmp_path: Path) -> None:
    send = {"f": "send", "topic": "t0", "partition": 0, "value": 1}
    path = tmp_path / "history.jsonl"
    write_history(
        path,
        [
            txn_line(0, 0, "invoke", [send]),
            txn_line(1, 0, "ok", [{**send, "offset": 0}]),
            txn_line(2, 1, "invoke", None),  # line 3: no mops
            txn_line(3, 1, "ok", [{"f": "poll", "records": []}]),
            txn_line(4, 2, "invoke", [{"f": "send", "topic": "t0", "value": 2}]),  # line 5: no partition
        ],
    )
    with pytest.raises(HistoryError) as refused:
        list(iter_ops(path))
    assert refused.value.line_no == 3 and "txn without its micro-operations (mops)" in str(refused.value)
    result = check_history(path)
    assert result["incomplete"][0] == (
        "malformed-line: 2 unreadable history line(s) (first: line 3: txn without its micro-operations (mops))"
    )


def test_read_committed_gaps_are_no_poll_skip_but_a_skipped_record_is(tmp_path: Path) -> None:
    """In a transactional history offsets have gaps (markers, aborted records): a poll passing one
    is fine; passing a record sighted elsewhere is a poll-skip, counting the records skipped."""
    send = {"f": "send", "topic": "t0", "partition": 0}
    rec = lambda o, v: {"topic": "t0", "partition": 0, "offset": o, "value": v}  # noqa: E731
    ops = [
        txn_line(0, 0, "invoke", [{**send, "value": 1}]),
        txn_line(1, 0, "ok", [{**send, "value": 1, "offset": 0}]),  # marker at 1
        txn_line(2, 0, "invoke", [{**send, "value": 2}]),
        txn_line(3, 0, "fail", [{**send, "value": 2, "offset": 2}], error="aborted"),  # aborted, marker 3
        txn_line(4, 0, "invoke", [{**send, "value": 3}]),
        txn_line(5, 0, "ok", [{**send, "value": 3, "offset": 4}]),  # marker at 5
        txn_line(6, 0, "invoke", [{**send, "value": 4}]),
        txn_line(7, 0, "ok", [{**send, "value": 4, "offset": 6}]),
        {"index": 8, "time": 9000, "process": 1, "type": "invoke", "f": "poll"},
        {
            "index": 9,
            "time": 9500,
            "process": 1,
            "type": "ok",
            "f": "poll",
            "records": [rec(0, 1), rec(4, 3)],
        },
        {"index": 10, "time": 9600, "process": 2, "type": "invoke", "f": "poll"},
        {
            "index": 11,
            "time": 9700,
            "process": 2,
            "type": "ok",
            "f": "poll",
            "records": [rec(0, 1), rec(6, 4)],
        },
        {"index": 12, "time": 9800, "process": 2, "type": "invoke", "f": "poll"},
        {"index": 13, "time": 9900, "process": 2, "type": "ok", "f": "poll", "records": [rec(4, 3)]},
    ]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    result = check_history(path)
    skips = result["anomalies"]["poll-skip"]
    assert skips["count"] == 1
    assert {k: skips["examples"][0][k] for k in ("index", "process", "offset", "prev_offset", "skipped")} == {
        "index": 11, "process": 2, "offset": 6, "prev_offset": 0, "skipped": 1,
    }  # fmt: skip
    assert result["anomalies"]["nonmonotonic-poll"]["count"] == 1  # process 2 read 4 after 6
    assert result["stats"]["txns"] == {"ok": 3, "fail": 1, "info": 0, "open": 0}
