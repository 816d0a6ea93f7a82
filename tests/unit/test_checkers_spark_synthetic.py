"""The benchmark's synthetic histories: well-formed, and holding exactly what was planted."""

from __future__ import annotations

from pathlib import Path

from checkers.reference import check_history
from history.pairing import pair_problems
from history.synthetic.generator import generate
from history.synthetic.kinds import PLANTABLE


def test_clean_synthetic_history_has_no_anomaly(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    planted = generate(path, 8_000, seed=1, plants={}, crash_rate=0.01)
    assert planted.counts() == dict.fromkeys(PLANTABLE, 0)
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations
    assert abs(summary.ops - 8_000) < 200 and planted.ops == summary.ops
    result = check_history(path)
    assert {n: a["count"] for n, a in result["anomalies"].items() if a["count"]} == {}
    assert result["incomplete"] == []
    assert result["stats"]["sends"]["info"] > 0 and result["stats"]["sends"]["fail"] > 0


def test_planted_anomalies_are_exactly_what_the_reference_finds(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    planted = generate(path, 12_000, seed=2, plants=dict.fromkeys(PLANTABLE, 2), crash_rate=0.005)
    result = check_history(path)
    found = {n: a["count"] for n, a in result["anomalies"].items() if a["count"]}
    assert found == {n: count for n, count in planted.counts().items() if count}
    assert set(planted.counts()) <= set(result["anomalies"])
    for name, instances in planted.anomalies.items():
        examples = result["anomalies"][name]["examples"]
        for instance in instances:
            assert any(all(e.get(k, v) == v for k, v in instance.items()) for e in examples), (name, instance)
    assert result["incomplete"] == []
