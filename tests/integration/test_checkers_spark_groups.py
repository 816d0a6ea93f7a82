"""The consumer-group rules on Spark agree with the reference: a planted group-skip and a
nonmonotonic commit are judged alike by both engines (`==`), and a history of a correct group
shows neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import spark as spark_checker
from checkers.reference import check_history as reference_check
from history.synthetic.builder import HistoryBuilder

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
    # Group h returned everything it committed past.
    b.subscribe(3, "h")
    b.poll(3, [(0, 10), (1, 11)])
    b.commit(3, "h", [("t0", 0, 2)], mode="auto")
    b.poll(4, [(0, 10), (1, 11), (2, 12), (3, 13)])
    path = b.write(tmp_path / "history.jsonl")

    on_spark, reference = spark_checker.check_history(path, reconvert=True), reference_check(path)
    assert on_spark == reference
    counts = {name: a["count"] for name, a in reference["anomalies"].items() if a["count"]}
    assert counts == {"group-skip": 1, "nonmonotonic-commit": 1}
    (skip,) = reference["anomalies"]["group-skip"]["examples"]
    assert (skip["group"], skip["offset"], skip["value"], skip["committed_offset"]) == ("g", 0, 10, 2)
