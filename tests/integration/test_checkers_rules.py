"""Every anomaly of the registry (`checkers/rules/`), planted, is found by both engines, and the
two agree on the whole results.json: one history with every history anomaly planted, one with
every transactional one, one run with replica logs that diverge and lose an acknowledged record.

A registered anomaly that no planter below makes fails `test_every_registered_anomaly_is_planted`:
a new rule comes with a way to plant it (the synthetic generators of `history/synthetic/` and
`tests/support/txn_histories.py`, or a replica data dir here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check_run
from checkers.engines import REFERENCE, SPARK
from checkers.rules import ANOMALIES
from history.synthetic.generator import generate_ops
from history.synthetic.kinds import PLANTABLE
from tests.support.checked_runs import make_run, plant_replica_loss
from tests.support.hypothesis_settings import FEW
from tests.support.txn_histories import TXN_PLANTABLE, generate_txn_ops

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def history_run(tmp: Path, seed: int) -> Path:
    ops, _ = generate_ops(300, seed=seed, plants=dict.fromkeys(PLANTABLE, 1), concurrency=5, partitions=2)
    return make_run(tmp, ops)


def txn_run(tmp: Path, seed: int) -> Path:
    ops, _ = generate_txn_ops(seed, transactions=40, plants=dict.fromkeys(TXN_PLANTABLE, 1), partitions=2)
    return make_run(tmp, ops)


def replica_run(tmp: Path, seed: int) -> Path:
    ops, _ = generate_ops(200, seed=seed, concurrency=4, partitions=2)
    run = make_run(tmp, ops)
    plant_replica_loss(run)
    return run


# Which run plants which anomalies.
PLANTERS: dict[str, Callable[[Path, int], Path]] = {
    **dict.fromkeys(PLANTABLE, history_run),
    **{name: txn_run for name in TXN_PLANTABLE if name != "G1c-ww"},
    "log-divergence": replica_run,
    "lost-committed-on-replicas": replica_run,
}


def test_every_registered_anomaly_is_planted() -> None:
    assert {a.name for a in ANOMALIES} <= set(PLANTERS)


@pytest.mark.slow  # 69 s at load 10; test_checkers_spark_engine's agreement tests plant them in CI
@settings(FEW, max_examples=2)
@given(seed=st.integers(0, 10_000))
def test_each_planted_anomaly_is_found_alike_by_both_engines(
    spark: Any, tmp_path_factory: Any, seed: int
) -> None:
    for planter in dict.fromkeys(PLANTERS.values()):
        run = planter(tmp_path_factory.mktemp("run"), seed)
        on_spark = check_run(run, SPARK, write=False)
        reference = check_run(run, REFERENCE, write=False)
        assert {k: v for k, v in on_spark.items() if k != "checker"} == {
            k: v for k, v in reference.items() if k != "checker"
        }
        for name in (n for n, p in PLANTERS.items() if p is planter and n in reference["anomalies"]):
            assert reference["anomalies"][name]["count"] >= 1, (
                f"{name} planted by {planter.__name__}, not found"
            )
