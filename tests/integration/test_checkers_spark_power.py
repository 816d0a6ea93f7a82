"""Verdict power on Spark agrees with the reference (`==` on results.json's `power`): on generated
histories with faults, crashes and planted anomalies, on a transactional one, and on a hand-written
one with consumer groups, silent fault windows and events on the seconds where windows end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import spark as spark_checker
from checkers.power import Asked, evaluate
from checkers.power_history import tally_history
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder, write_history
from tests.support.txn_histories import generate_txn_ops

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

ASKED = Asked(rate=50.0, crash_clients=2.0, groups=True, faults=True, recovery_s=0.5)


def both(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Spark's power, the reference's power) of one history."""
    run = spark_checker.check_run(path, reconvert=True, power=ASKED)
    assert run.power is not None
    return evaluate(*run.power, ASKED), evaluate(*tally_history(path, ASKED), ASKED)


def grouped(b: HistoryBuilder) -> None:
    """Groups, a silent window, events a few ms around window ends, a crash, the final drain."""
    b.subscribe(1, "g")
    for second in range(6):
        b.send(0, second, offset=second)
        b.poll(1, [(second, second)])
        b.commit(1, "g", [("t0", 0, second + 1)])
        b.op(process=1, type="invoke", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
        b.op(process=1, type="ok", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
        if second == 2:
            b.nemesis("kill", {"nodes": ["n2"], "fault_id": "kill-1"})
        if second == 3:
            b.nemesis("start", {"nodes": ["n2"], "fault_id": "kill-1"})
        b.advance(0.4)
    b.nemesis("pause", {"nodes": ["n1"], "fault_id": "pause-2"})
    b.advance(3.0)  # silent
    b.nemesis("resume", {"nodes": ["n1"], "fault_id": "pause-2"})
    b.op(process=5, type="invoke", f="crash")
    b.op(process=5, type="info", f="crash", error="killed")
    b.send(0, 99, offset=6)
    b.assign(9, final=True)
    b.poll(9, [(o, o) for o in range(6)])


@pytest.mark.parametrize("kind", ["generated", "transactions", "groups"])
def test_power_agrees_with_the_reference(spark: Any, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "history.jsonl"
    if kind == "generated":
        ops, _ = generate_ops(3000, seed=3, plants={"lost-write": 2, "duplicate": 1}, nemesis_rate=0.01)
        write_history(path, ops)
    elif kind == "transactions":
        write_history(path, generate_txn_ops(5, transactions=80)[0])
    else:
        b = HistoryBuilder()
        grouped(b)
        b.write(path)
    on_spark, reference = both(path)
    assert on_spark == reference
    assert reference["run"]["acked_writes"] > 0 and reference["run"]["reads"] > 0
    if kind == "groups":
        assert reference["run"]["commits"] == 6 and reference["run"]["crashes"] == 1
        assert [w["loaded"] for w in reference["windows"]] == [True, False]
