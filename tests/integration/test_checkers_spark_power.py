"""Verdict power on Spark agrees with the reference (`==` on results.json's `power`): on generated
histories with faults, crashes and planted anomalies, on a transactional one, and on a hand-written
one with consumer groups, silent fault windows and events on the seconds where windows end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import spark_power, spark_txn
from checkers.parquet import convert
from checkers.power import Asked, evaluate
from checkers.power_history import tally_history
from checkers.spark_stats import nemesis_op
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder, write_history
from tests.support.power_histories import grouped
from tests.support.txn_histories import generate_txn_ops

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

ASKED = Asked(rate=50.0, crash_clients=2.0, groups=True, faults=True, recovery_s=1.5)


def both(spark: Any, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Spark's power, the reference's power) of one history, Spark's from its power jobs alone on
    the history's Parquet form (a whole check, `checkers.spark.check_run(power=...)`, runs the same
    jobs after the anomalies: every Spark run of the suite goes through it)."""
    form = convert(path, force=True)
    operations, reads = str(form.operations_path), str(form.reads_path)
    txns = spark_txn.prepare(spark, str(path), operations, reads, form.topics)
    try:
        nemesis = [nemesis_op(row) for row in form.nemesis or []]
        on_spark = spark_power.tally(spark, operations, reads, nemesis, ASKED, txns)
    finally:
        if txns is not None:
            txns.unpersist()
    return evaluate(*on_spark, ASKED), evaluate(*tally_history(path, ASKED), ASKED)


@pytest.mark.parametrize("kind", ["generated", "transactions", "groups"])
def test_power_agrees_with_the_reference(spark: Any, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "history.jsonl"
    if kind == "generated":
        ops, _ = generate_ops(1500, seed=3, plants={"lost-write": 2, "duplicate": 1}, nemesis_rate=0.01)
        write_history(path, ops)
    elif kind == "transactions":
        write_history(path, generate_txn_ops(5, transactions=60)[0])
    else:
        b = HistoryBuilder()
        grouped(b)
        b.write(path)
    on_spark, reference = both(spark, path)
    assert on_spark == reference
    if kind == "groups":
        assert reference["windows"][0]["ready_s"] is not None
    assert reference["run"]["acked_writes"] > 0 and reference["run"]["reads"] > 0
    if kind == "groups":
        assert reference["run"]["commits"] == 6 and reference["run"]["crashes"] == 1
        assert [w["loaded"] for w in reference["windows"]] == [True, False]
