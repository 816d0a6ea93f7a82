"""The Spark engine judges transactional histories exactly as the reference does (`==`): planted
aborted reads, torn transactions, G0 and G1c cycles (wr-only and through a ww edge) and
precommitted reads, found exactly, with the statistics' facts equal too.

One shared local Spark session; each check is several Spark jobs, so CI runs one history with
every kind planted, and the generated histories (hypothesis, five) are `slow`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkers import spark as spark_checker
from checkers.reference import check_history as reference_check
from checkers.stats import history_facts
from tests.support.history_builder import write_history
from tests.support.hypothesis_settings import FEW
from tests.support.txn_histories import TXN_PLANTABLE, generate_txn_ops

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def judged_alike(spark: Any, tmp_path: Path, seed: int, plants: dict[str, int]) -> None:
    ops, planted = generate_txn_ops(seed, 40, plants)
    path = tmp_path / f"h{seed}-{sum(plants.values())}.jsonl"
    write_history(path, ops)
    got, facts = spark_checker.check(path, reconvert=True, facts=True)
    expected = reference_check(path)
    assert got == expected
    assert facts == history_facts(path)
    counts = planted.counts()
    counts["G1c"] = counts.get("G1c", 0) + counts.pop("G1c-ww", 0)
    found = {name: a["count"] for name, a in got["anomalies"].items() if a["count"]}
    assert found == {name: n for name, n in counts.items() if n}


def test_spark_judges_every_planted_transactional_anomaly_as_the_reference(
    spark: Any, tmp_path: Path
) -> None:
    judged_alike(spark, tmp_path, 7, dict.fromkeys(TXN_PLANTABLE, 1))


@pytest.mark.slow
@FEW
@given(
    seed=st.integers(0, 10_000),
    plants=st.fixed_dictionaries({kind: st.integers(0, 2) for kind in TXN_PLANTABLE}),
)
def test_spark_judges_generated_transactional_histories_as_the_reference(
    spark: Any, tmp_path: Path, seed: int, plants: dict[str, int]
) -> None:
    judged_alike(spark, tmp_path, seed, plants)
