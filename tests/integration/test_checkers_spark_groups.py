"""The consumer-group rules on Spark agree with the reference: a planted group-skip and a
nonmonotonic commit are judged alike by both engines (`==`), and so is which poll anomalies are
group members' reads (`members`), beside an assigning process's; a value a process read before
it joined the group is not one the group returned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import spark as spark_checker
from checkers.reference import check_history as reference_check
from tests.support.history_builder import HistoryBuilder

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_planted_group_skip_and_nonmonotonic_commit_agree(spark: Any, tmp_path: Path) -> None:
    b = HistoryBuilder()
    for offset, value in enumerate((10, 11, 12, 13)):
        b.send(0, value, offset=offset)
    # Group g commits past offset 0 although its members returned only 11 and 12.
    b.subscribe(1, "g")
    b.subscribe(2, "g")
    b.poll(1, [(1, 11)])
    b.commit(1, "g", [("t0", 0, 2)])
    b.poll(2, [(2, 12)])
    b.commit(2, "g", [("t0", 0, 3)])
    b.commit(2, "g", [("t0", 0, 1)])  # goes back: nonmonotonic-commit
    b.commit(1, "g", [("t0", 0, 4)], outcome="fail")  # refused: no skip of 13
    b.poll(8, [(0, 10)])  # process 8 read 10 before it joined g: g did not return 10
    b.subscribe(8, "g")
    # Group h returned everything it committed past.
    b.subscribe(3, "h")
    b.poll(3, [(0, 10), (1, 11)])
    b.commit(3, "h", [("t0", 0, 2)], mode="auto")
    b.poll(3, [(3, 13)])  # a member skips 12: poll-skip of a member
    b.poll(5, [(1, 11)])
    b.poll(5, [(0, 10)])  # an assigning process goes back: nonmonotonic-poll, not a member's
    # Offset 4 held 14 when process 6 read it, then 15 (replaced); h returned 15 and committed past
    # it: no group-skip, since the final drain (process 4) read 15 there.
    b.send(0, 14, offset=4)
    b.poll(6, [(4, 14)])
    b.send(0, 15, offset=4)
    b.poll(3, [(4, 15)])
    b.subscribe(7, "h")
    b.poll(7, [(2, 12)])  # the member 3 skipped 12, another member of h returned it
    b.commit(3, "h", [("t0", 0, 5)])
    b.assign(4, final=True)
    b.poll(4, [(0, 10), (1, 11), (2, 12), (3, 13), (4, 15)])
    path = b.write(tmp_path / "history.jsonl")

    on_spark, reference = spark_checker.check_history(path, reconvert=True), reference_check(path)
    assert on_spark == reference
    counts = {name: a["count"] for name, a in reference["anomalies"].items() if a["count"]}
    assert counts == {
        "group-skip": 1,
        "nonmonotonic-commit": 1,
        "poll-skip": 1,
        "nonmonotonic-poll": 1,
        "inconsistent-offsets": 1,
    }
    anomalies = reference["anomalies"]
    assert (anomalies["poll-skip"]["members"], anomalies["nonmonotonic-poll"]["members"]) == (1, 0)
    (skip,) = reference["anomalies"]["group-skip"]["examples"]
    assert (skip["group"], skip["offset"], skip["value"], skip["committed_offset"]) == ("g", 0, 10, 2)
