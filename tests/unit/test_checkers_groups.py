"""The consumer-group rules of the reference checker: group-skip and nonmonotonic-commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.reference import check_history
from checkers.verdict import decide
from foundation.config import TestConfig
from tests.support.checked_runs import no_replica_anomalies
from tests.support.history_builder import HistoryBuilder


def found(tmp_path: Path, b: HistoryBuilder) -> dict[str, Any]:
    result = check_history(b.write(tmp_path / "history.jsonl"))
    return {name: a for name, a in result["anomalies"].items() if a["count"]}


def three_records(b: HistoryBuilder) -> None:
    for offset, value in enumerate((10, 11, 12)):
        b.send(0, value, offset=offset)


def test_a_group_that_commits_past_a_record_no_member_polled_is_a_group_skip(tmp_path: Path) -> None:
    b = HistoryBuilder()
    three_records(b)
    b.subscribe(1, "g")
    b.poll(1, [(1, 11)])  # the member never returned 10 (offset 0) ...
    _, commit = b.commit(1, "g", [("t0", 0, 2)])  # ... yet the group commits past it
    drain, _ = b.poll(2, [(0, 10), (1, 11), (2, 12)])
    anomalies = found(tmp_path, b)
    assert set(anomalies) == {"group-skip"}
    assert anomalies["group-skip"]["examples"] == [
        {
            "index": commit,
            "process": 1,
            "group": "g",
            "topic": "t0",
            "partition": 0,
            "offset": 0,
            "value": 10,
            "committed_offset": 2,
            "read_index": drain + 1,
            "read_process": 2,
        }
    ]
    verdict = decide(
        check_history(tmp_path / "history.jsonl"),
        no_replica_anomalies(),
        TestConfig(consume="subscribe"),
        {"complete": True},
    )
    assert verdict["valid"] is False and verdict["fatal"] == ["group-skip"]


def test_records_another_member_returned_or_not_yet_committed_are_no_skip(tmp_path: Path) -> None:
    b = HistoryBuilder()
    three_records(b)
    b.subscribe(1, "g")
    b.subscribe(2, "g")
    b.poll(1, [(0, 10)])
    b.poll(2, [(1, 11)])  # another member of the group returned 11
    b.commit(2, "g", [("t0", 0, 2)])
    b.commit(1, "g", [("t0", 0, 3)], outcome="fail")  # refused: commits nothing
    b.subscribe(3, "other")
    b.poll(3, [(2, 12)])  # a member of another group does not count for g, but g never passed 2
    b.poll(4, [(0, 10), (1, 11), (2, 12)])
    assert found(tmp_path, b) == {}


def test_group_skip_judges_the_final_log_that_the_drain_read(tmp_path: Path) -> None:
    """A record another process read at offset 0 was later replaced there (a truncation): the
    final drain reads the partition's final log, where offset 0 holds 20, which the group returned.
    Without a marked drain, the first read of each position stands for the log (older histories)."""
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.poll(1, [(0, 10)])  # an assigning process reads 10 at offset 0 ...
    b.send(0, 20, offset=0)  # ... which a new leader's log replaced with 20
    b.subscribe(2, "g")
    b.poll(2, [(0, 20)])
    b.commit(2, "g", [("t0", 0, 1)])
    unmarked = b.write(tmp_path / "unmarked.jsonl")
    assert found(tmp_path, b)["group-skip"]["examples"][0]["value"] == 10
    b.assign(3, final=True)
    b.poll(3, [(0, 20)])
    result = check_history(b.write(tmp_path / "history.jsonl"))
    assert result["anomalies"]["group-skip"]["count"] == 0
    assert result["anomalies"]["inconsistent-offsets"]["count"] == 1  # the replacement shows there
    assert check_history(unmarked)["anomalies"]["group-skip"]["count"] == 1


def test_a_value_of_the_final_log_that_no_member_returned_is_a_group_skip(tmp_path: Path) -> None:
    marked = HistoryBuilder()
    marked.send(0, 30, offset=0)
    marked.subscribe(2, "g")
    _, commit = marked.commit(2, "g", [("t0", 0, 1)])
    marked.assign(3, final=True)
    _, drain = marked.poll(3, [(0, 30)])
    [skip] = check_history(marked.write(tmp_path / "marked.jsonl"))["anomalies"]["group-skip"]["examples"]
    assert (skip["index"], skip["value"], skip["read_index"], skip["read_process"]) == (commit, 30, drain, 3)


def test_a_commit_lower_than_one_acknowledged_before_it_began_is_nonmonotonic(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.subscribe(1, "g")
    b.subscribe(2, "g")
    _, first = b.commit(1, "g", [("t0", 0, 5), ("t0", 1, 1)])
    _, second = b.commit(2, "g", [("t0", 0, 3), ("t0", 1, 2)])
    anomalies = found(tmp_path, b)
    assert set(anomalies) == {"nonmonotonic-commit"}
    assert anomalies["nonmonotonic-commit"]["examples"] == [
        {
            "index": second,
            "process": 2,
            "group": "g",
            "topic": "t0",
            "partition": 0,
            "offset": 3,
            "prev_index": first,
            "prev_offset": 5,
        }
    ]


def test_concurrent_commits_and_other_groups_are_not_compared(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.subscribe(1, "g")
    b.subscribe(2, "g")
    b.subscribe(3, "h")
    b.op(process=1, type="invoke", f="commit", group="g", mode="auto", offsets=[_at(5)])
    b.op(process=2, type="invoke", f="commit", group="g", mode="auto", offsets=[_at(3)])
    b.op(process=1, type="ok", f="commit", group="g", mode="auto", offsets=[_at(5)])
    b.op(process=2, type="ok", f="commit", group="g", mode="auto", offsets=[_at(3)])  # overlapped
    b.commit(3, "h", [("t0", 0, 1)])  # another group's offsets are its own
    assert found(tmp_path, b) == {}


def _at(offset: int) -> dict[str, Any]:
    return {"topic": "t0", "partition": 0, "offset": offset}
