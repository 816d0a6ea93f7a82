"""The reference checker on small hand-written histories: each anomaly, its edge cases, its examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.catalogue import HISTORY_ANOMALIES, MAX_EXAMPLES, NAMES, incomplete_kind
from checkers.reference import check_history
from tests.support.history_builder import HistoryBuilder


def check(tmp_path: Path, b: HistoryBuilder):  # type: ignore[no-untyped-def]
    return check_history(b.write(tmp_path / "history.jsonl"))


def found(result) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}


def test_every_history_anomaly_is_reported_even_when_absent(tmp_path: Path) -> None:
    result = check(tmp_path, HistoryBuilder())
    assert list(result["anomalies"]) == list(HISTORY_ANOMALIES)
    assert set(HISTORY_ANOMALIES) < set(NAMES)
    assert found(result) == {} and result["incomplete"] == []


def test_lost_write_when_a_later_read_reached_past_it(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.send(0, 11, offset=1)
    b.poll(1, [(1, 11)])
    result = check(tmp_path, b)
    assert found(result) == {"lost-write": 1}
    [example] = result["anomalies"]["lost-write"]["examples"]
    assert example == {
        "index": 1,
        "invoke_index": 0,
        "process": 0,
        "topic": "t0",
        "partition": 0,
        "offset": 0,
        "value": 10,
        "max_read_offset": 1,
        "max_read_index": 5,
    }


def test_unseen_when_no_read_reached_past_it(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.send(0, 11, offset=0, partition=1)
    b.poll(1, [(0, 99)], partition=1)  # reached the offset with another value, not past it
    b.send(2, 99, outcome="info", partition=1)
    result = check(tmp_path, b)
    assert found(result) == {"unseen": 2, "inconsistent-offsets": 1}
    first, second = result["anomalies"]["unseen"]["examples"]
    assert first["value"] == 10 and first["max_read_offset"] is None
    assert second["value"] == 11 and second["max_read_offset"] == 0


def test_read_in_another_partition_still_counts_as_read(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.send(0, 11, offset=1)
    b.poll(1, [("t0", 5, 0, 10), ("t0", 0, 1, 11)])
    assert found(check(tmp_path, b)) == {"duplicate": 1}


def test_info_send_is_never_lost_and_fine_if_read(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, outcome="info")  # never read: not lost
    b.send(1, 11, outcome="info")  # read later: fine
    b.send(2, 12, offset=1)
    b.poll(3, [(0, 11), (1, 12)])
    assert found(check(tmp_path, b)) == {}


def test_value_read_before_its_send_completed_is_fine(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.invoke_send(0, 10)
    b.poll(1, [(0, 10)])
    b.complete_send(0, 10, "ok", offset=0)
    assert found(check(tmp_path, b)) == {}


def test_acked_offset_reused_by_a_later_leader(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.send(0, 11, offset=1)  # acked, then truncated away by a new leader
    b.nemesis("kill", {"nodes": ["n1"]})
    b.send(1, 12, offset=1)  # the new leader reused offset 1
    b.send(1, 13, offset=2)
    b.poll(2, [(0, 10), (1, 12), (2, 13)])
    result = check(tmp_path, b)
    assert found(result) == {"lost-write": 1, "inconsistent-offsets": 1}
    assert result["anomalies"]["lost-write"]["examples"][0]["value"] == 11
    [example] = result["anomalies"]["inconsistent-offsets"]["examples"]
    assert example["offset"] == 1
    assert [v["value"] for v in example["values"]] == [11, 12]
    assert example["index"] == example["values"][0]["index"]


def test_duplicate_names_every_position(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    b.poll(1, [(0, 10), (1, 10)])
    result = check(tmp_path, b)
    assert found(result) == {"duplicate": 1}
    [example] = result["anomalies"]["duplicate"]["examples"]
    assert example["value"] == 10
    assert [(p["offset"], p["process"]) for p in example["positions"]] == [(0, 0), (1, 1)]
    assert example["index"] == 1


def test_aborted_read_names_the_failed_send(tmp_path: Path) -> None:
    b = HistoryBuilder()
    _, failed = b.send(0, 10, outcome="fail")
    b.send(0, 11, outcome="fail")
    b.send(0, 11, outcome="ok", offset=1)  # the same value sent again and acked: not aborted
    _, poll = b.poll(1, [(0, 10), (1, 11)])
    result = check(tmp_path, b)
    assert found(result) == {"aborted-read": 1}
    [example] = result["anomalies"]["aborted-read"]["examples"]
    assert example == {
        "index": poll,
        "process": 1,
        "topic": "t0",
        "partition": 0,
        "offset": 0,
        "value": 10,
        "send_index": failed,
        "send_process": 0,
    }


def test_phantom(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.poll(1, [(0, 77), (1, 77)])
    result = check(tmp_path, b)
    assert found(result) == {"phantom": 1, "duplicate": 1}
    assert result["anomalies"]["phantom"]["examples"][0]["offset"] == 0


def test_poll_skip_across_polls_of_one_process(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for v in range(5):
        b.send(0, v, offset=v, outcome="info")
    b.poll(1, [(0, 0)])
    _, second = b.poll(1, [(3, 3)])
    b.poll(2, [(4, 4)])  # another process: no position yet
    result = check(tmp_path, b)
    assert found(result) == {"poll-skip": 1}
    [example] = result["anomalies"]["poll-skip"]["examples"]
    assert example == {
        "index": second,
        "process": 1,
        "topic": "t0",
        "partition": 0,
        "offset": 3,
        "prev_offset": 0,
        "prev_index": second - 2,
        "skipped": 2,
    }


@pytest.mark.parametrize("between", ["assign", "info-poll", "open-poll-none", "other-partition"])
def test_position_is_forgotten_at_assign_and_after_an_info_poll(tmp_path: Path, between: str) -> None:
    b = HistoryBuilder()
    for v in range(5):
        b.send(0, v, offset=v, outcome="info")
    b.poll(1, [(0, 0)])
    if between == "assign":
        b.assign(1, [("t0", 0)], seek="position")
    elif between == "info-poll":
        b.poll(1, outcome="info")
    elif between == "other-partition":
        b.poll(1, [("t0", 1, 7, 0)])
    b.poll(1, [(3, 3)])
    expected = {} if between in ("assign", "info-poll") else {"poll-skip": 1}
    if between == "other-partition":
        expected["duplicate"] = 1
    assert found(check(tmp_path, b)) == expected


def test_nonmonotonic_poll_going_back_or_repeating(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for v in range(4):
        b.send(0, v, offset=v, outcome="info")
    b.poll(1, [(2, 2), (3, 3)])
    b.poll(1, [(1, 1)])  # back
    b.poll(1, [(1, 1)])  # repeat
    result = check(tmp_path, b)
    assert found(result) == {"nonmonotonic-poll": 2}
    first, second = result["anomalies"]["nonmonotonic-poll"]["examples"]
    assert (first["prev_offset"], first["offset"]) == (3, 1)
    assert (second["prev_offset"], second["offset"]) == (1, 1)


def test_nonmonotonic_send_per_process_and_partition(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=5)
    b.send(0, 11, offset=0, partition=1)  # another partition: fine
    b.send(1, 12, offset=1)  # another process: fine
    _, later = b.send(0, 13, offset=3)
    b.poll(2, [(1, 12), (3, 13), (5, 10), ("t0", 1, 0, 11)])
    result = check(tmp_path, b)
    assert found(result) == {"nonmonotonic-send": 1, "poll-skip": 2}
    [example] = result["anomalies"]["nonmonotonic-send"]["examples"]
    assert (example["index"], example["prev_offset"], example["offset"], example["prev_value"]) == (
        later,
        5,
        3,
        10,
    )


def test_ok_send_without_offset_is_not_judged(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=None)  # acks=0: no offset
    b.send(0, 11, offset=-1)
    result = check(tmp_path, b)
    assert found(result) == {} and result["stats"]["acked"] == 0


def test_crash_completes_the_open_op_as_info(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.invoke_send(0, 10)
    b.op(process=0, type="info", f="crash")
    b.poll(1, [(0, 10)])
    result = check(tmp_path, b)
    assert found(result) == {} and result["incomplete"] == []
    assert result["stats"]["sends"]["info"] == 1


def test_open_invocations_make_the_history_incomplete(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.invoke_send(0, 10)
    b.invoke_poll(1)
    b.poll(2, [(0, 10)])  # the open send counts as possibly written
    result = check(tmp_path, b)
    assert found(result) == {}
    [reason] = result["incomplete"]
    assert incomplete_kind(reason) == "open-invocation" and "2 client operation(s)" in reason
    assert result["stats"]["sends"]["open"] == 1 and result["stats"]["polls"]["open"] == 1


def test_torn_tail_and_malformed_lines(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 10, offset=0)
    path = b.write(tmp_path / "history.jsonl")
    with open(path, "a") as f:
        f.write("not json\n")
        f.write(json.dumps({"index": 3, "time": 5, "process": 1, "type": "invoke", "f": "poll"}) + "\n")
        f.write('{"index": 4, "time": 6, "pro')
    result = check_history(path)
    kinds = sorted(incomplete_kind(r) for r in result["incomplete"])
    assert kinds == ["malformed-line", "open-invocation", "torn-tail"]


def test_unpaired_and_malformed_ops(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.op(process=0, type="ok", f="poll", records=[])  # no invocation
    b.invoke_poll(1)
    b.invoke_poll(1)  # invoked again while open
    b.op(process=1, type="ok", f="poll", records=[{"topic": "t0", "partition": 0, "offset": "x", "value": 1}])
    result = check(tmp_path, b)
    kinds = sorted(incomplete_kind(r) for r in result["incomplete"])
    assert kinds == ["malformed-op", "unpaired", "unpaired"]
    assert result["stats"]["records_read"] == 0


def test_examples_are_the_smallest_twenty_by_index(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for v in range(200):
        b.send(v % 7, v, offset=v)
    result = check(tmp_path, b)
    unseen = result["anomalies"]["unseen"]
    assert unseen["count"] == 200
    assert [e["value"] for e in unseen["examples"]] == list(range(MAX_EXAMPLES))


def test_stats_count_outcomes(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.assign(1)
    b.send(0, 1, offset=0)
    b.send(0, 2, outcome="fail")
    b.send(0, 3, outcome="info")
    b.poll(1, [(0, 1)])
    b.poll(1, outcome="info")
    b.nemesis("kill", {"nodes": ["n1"]})
    stats = check(tmp_path, b)["stats"]
    assert stats["ops"] == 14
    assert stats["sends"] == {"ok": 1, "fail": 1, "info": 1, "open": 0}
    assert stats["polls"] == {"ok": 1, "fail": 0, "info": 1, "open": 0}
    assert stats["assigns"]["ok"] == 1
    assert stats["records_read"] == 1 and stats["acked"] == 1
