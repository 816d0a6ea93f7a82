"""Verdict rules (as data), trust of incomplete histories, stats, and check_run on run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_run
from checkers.catalogue import NAMES
from checkers.engines import REFERENCE, engine_named
from checkers.reference import check_history
from checkers.stats import compute_stats, percentile
from checkers.verdict import CONDITIONS, RULES, decide
from foundation.config import TestConfig
from foundation.errors import BadInput
from history.synthetic.generator import generate_ops
from tests.support.checked_runs import make_run, no_replica_anomalies
from tests.support.history_builder import HistoryBuilder, write_history


def verdict_of(
    tmp_path: Path, b: HistoryBuilder, drain: Any = None, config: TestConfig | None = None, tail: str = ""
) -> dict[str, Any]:
    path = b.write(tmp_path / "history.jsonl")
    if tail:
        with open(path, "a") as f:
            f.write(tail)
    return decide(check_history(path), no_replica_anomalies(), config or TestConfig(), drain)


COMPLETE = {"complete": True}


def test_rules_name_known_anomalies_and_conditions() -> None:
    assert all(r.anomaly in NAMES and r.condition in CONDITIONS for r in RULES)


def test_clean_history_with_complete_drain_is_valid(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.poll(1, [(0, 1)])
    result = verdict_of(tmp_path, b, COMPLETE)
    assert result["valid"] is True and result["fatal"] == [] and result["incomplete"] == []
    assert set(result["anomalies"]) == set(NAMES)


def test_duplicate_is_allowed_only_without_idempotence(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.poll(1, [(0, 1), (1, 1)])
    assert verdict_of(tmp_path, b, COMPLETE)["valid"] is True
    assert verdict_of(tmp_path, b, COMPLETE)["anomalies"]["duplicate"]["effect"] == "allowed"
    strict = verdict_of(tmp_path, b, COMPLETE, TestConfig(idempotence=True))
    assert strict["valid"] is False and strict["fatal"] == ["duplicate"]


@pytest.mark.parametrize("consume", ["assign", "subscribe", "mixed"])
@pytest.mark.parametrize("member", [False, True])
def test_poll_skip_is_allowed_only_for_group_members(tmp_path: Path, consume: str, member: bool) -> None:
    """Whatever `consume` says: a group member's reads may go back, an assigning process's may not
    (under `mixed` both kinds run side by side)."""
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.send(0, 2, offset=1)
    if member:
        b.subscribe(1, "g")
    b.poll(1, [(1, 2)])
    b.poll(1, [(0, 1)])  # goes back: nonmonotonic-poll
    b.poll(2, [(0, 1), (1, 2)])
    result = verdict_of(tmp_path, b, {"complete": True}, TestConfig(consume=consume))
    nonmonotonic = result["anomalies"]["nonmonotonic-poll"]
    assert (nonmonotonic["count"], nonmonotonic["members"]) == (1, 1 if member else 0)
    assert nonmonotonic["effect"] == ("allowed" if member else "invalid")
    assert result["valid"] is member


def test_one_assigning_process_among_members_makes_poll_skip_invalid(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for offset, value in enumerate((1, 2, 3)):
        b.send(0, value, offset=offset)
    b.subscribe(1, "g")
    b.poll(1, [(0, 1)])
    b.poll(1, [(2, 3)])  # a member skips: allowed on its own
    b.poll(2, [(0, 1)])
    b.poll(2, [(2, 3)])  # an assigning process skips too
    b.poll(3, [(0, 1), (1, 2), (2, 3)])
    result = verdict_of(tmp_path, b, {"complete": True}, TestConfig(consume="mixed"))
    skip = result["anomalies"]["poll-skip"]
    assert (skip["count"], skip["members"], skip["effect"]) == (2, 1, "invalid")
    assert result["fatal"] == ["poll-skip"]


@pytest.mark.parametrize(
    ("drain", "valid"),
    [
        ({"complete": True}, False),
        (None, "unknown"),
        ({"complete": False, "reason": "time bound passed"}, "unknown"),
    ],
)
def test_unseen_is_invalid_only_after_a_complete_drain(tmp_path: Path, drain: Any, valid: Any) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    result = verdict_of(tmp_path, b, drain)
    assert result["valid"] == valid
    if drain and not drain["complete"]:
        assert any("time bound passed" in r for r in result["incomplete"])


def test_truncated_history_keeps_presence_but_not_absence_evidence(tmp_path: Path) -> None:
    torn = '{"index": 99, "ti'
    b = HistoryBuilder()
    b.send(0, 1, offset=5)
    b.send(0, 2, offset=3)  # nonmonotonic-send: shown by the lines present
    b.poll(1, [(3, 2), (4, 9), (5, 1)])
    b.send(2, 9, outcome="info")
    assert verdict_of(tmp_path, b, COMPLETE, tail=torn)["fatal"] == ["nonmonotonic-send"]

    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.send(0, 2, offset=1)
    b.poll(1, [(1, 2)])  # lost-write of 1: a missing line could have read it
    result = verdict_of(tmp_path, b, COMPLETE, tail=torn)
    assert result["valid"] == "unknown" and result["anomalies"]["lost-write"]["effect"] == "unknown"
    assert verdict_of(tmp_path, b, COMPLETE)["valid"] is False


def test_damaged_history_proves_nothing_from_the_history(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=5)
    b.send(0, 2, offset=3)
    path = b.write(tmp_path / "history.jsonl")
    path.write_text("garbage\n" + path.read_text())
    result = decide(check_history(path), no_replica_anomalies(), TestConfig(), COMPLETE)
    assert result["valid"] == "unknown" and result["anomalies"]["nonmonotonic-send"]["effect"] == "unknown"


def test_replica_evidence_stands_even_with_a_torn_history(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    path = b.write(tmp_path / "history.jsonl")
    with open(path, "a") as f:
        f.write('{"ind')
    findings = no_replica_anomalies()
    findings.anomalies["log-divergence"] = {
        "count": 1,
        "examples": [{"topic": "t0", "partition": 0, "offset": 0, "replicas": []}],
    }
    result = decide(check_history(path), findings, TestConfig(), None)
    assert result["valid"] is False and result["fatal"] == ["log-divergence"]


def test_unchecked_replicas_mean_unknown(tmp_path: Path) -> None:
    b = HistoryBuilder()
    path = b.write(tmp_path / "history.jsonl")
    result = decide(check_history(path), None, TestConfig(), COMPLETE)
    assert result["valid"] == "unknown"
    assert [r.split(":")[0] for r in result["incomplete"]] == ["empty", "replicas"]


def test_replicas_a_system_cannot_offer_leave_the_verdict_to_the_history(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.poll(1, [(0, 1)])
    path = b.write(tmp_path / "history.jsonl")
    why = "the replica-log checks were not available for this system"
    result = decide(check_history(path), None, TestConfig(), COMPLETE, replicas_unavailable=why)
    assert result["incomplete"] == [] and result["valid"] is True
    assert result["notes"] == [f"replicas: {why}"] and result["replicas_unavailable"] == why


def test_stats_throughput_latency_faults_and_unavailability(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.nemesis("kill", {"fault_id": "kill-1", "nodes": ["n1"]})
    b.advance(0.5)
    b.send(0, 2, offset=1)  # acked inside the fault window, later lost
    b.advance(2.0)  # nothing acknowledged for 2 s
    b.send(0, 3, outcome="info")
    b.nemesis("start", {"fault_id": "kill-1", "nodes": ["n1"]})
    b.send(0, 4, offset=2)
    b.poll(1, [(0, 1), (2, 4)])
    path = b.write(tmp_path / "history.jsonl")
    engine = check_history(path)
    stats = compute_stats(path, engine["stats"], {"lost-write": 1}, {"1": 2, "99": 1})
    assert stats["sends"] == {"ok": 3, "fail": 0, "info": 1, "open": 0}
    assert stats["acked_lost"] == 1
    assert stats["ops"]["send"]["ok"] == 3 and stats["ops"]["poll"]["ok"] == 1
    assert stats["latency_ms"]["p50"] == 1.0 and stats["latency_ms_by_f"]["send"]["p99"] == 1.0
    assert sum(row["ok"] + row["info"] for row in stats["throughput"]["series"]) == 5
    [window] = stats["fault_windows"]
    assert window["fault"] == "kill" and window["healed_by"] == "start"
    assert window["start_s"] < window["end_s"] and window["lost_write"] == 1
    assert window["missing_on_leader"] == 2 and window["acked_lost"] == 2
    assert window["ops"]["info"] == 1 and window["longest_gap_s"] >= 2.0
    [gap] = stats["unavailable"]
    assert gap["seconds"] >= 2.0 and gap["faults"] == ["kill"]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0


# --- check_run on run directories --------------------------------------------------------------


def test_check_run_writes_results(tmp_path: Path) -> None:
    ops, _ = generate_ops(120, seed=3)
    run = make_run(tmp_path, ops)
    results = check_run(run, engine=REFERENCE)
    assert results["valid"] is True, results["incomplete"]
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["valid"] is True and on_disk["checker"]["engine"] == "reference"
    assert on_disk["checker"]["seconds"] >= 0 and on_disk["stats"]["sends"]["ok"] > 0
    assert set(on_disk["stats"]["replicas"]) == {"t0-0", "t0-1"}


def test_check_run_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such run directory"):
        check_run(tmp_path / "missing")
    with pytest.raises(BadInput, match="history.jsonl is missing"):
        check_run(tmp_path)
    write_history(tmp_path / "history.jsonl", [])
    with pytest.raises(BadInput, match="unknown checker"):
        check_run(tmp_path, engine=engine_named("duckdb"))


def test_fault_windows_pair_by_fault_id_then_by_kind(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.nemesis("kill", {"fault_id": "kill-1", "nodes": ["n1"]})
    b.nemesis("kill", {"fault_id": "kill-2", "nodes": ["n2"]})
    b.nemesis("start", {"fault": "kill", "fault_id": "kill-2", "nodes": ["n2"]})
    b.nemesis("restart", {"fault_id": "restart-3", "nodes": ["n3"]})
    b.nemesis("pause", {"nodes": ["n3"]})  # an older history without ids
    b.nemesis("resume", {"nodes": ["n3"]})
    b.send(0, 1, offset=0)
    path = b.write(tmp_path / "history.jsonl")
    windows = compute_stats(path, check_history(path)["stats"], {})["fault_windows"]
    summary = [(w["fault"], w["healed_by"], w["start_s"] <= w["end_s"]) for w in windows]
    assert summary == [
        ("kill", None, True),  # kill-1 never healed: runs to the end
        ("kill", "start", True),
        ("restart", "restart", True),
        ("pause", "resume", True),
    ]
    assert windows[0]["end_s"] == windows[-1]["end_s"] or windows[0]["end_s"] >= windows[-1]["end_s"]


def test_lost_write_needs_a_complete_drain_to_be_invalid(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.send(0, 2, offset=1)
    b.poll(1, [(1, 2)])
    assert verdict_of(tmp_path, b, COMPLETE)["fatal"] == ["lost-write"]
    assert verdict_of(tmp_path, b, None)["valid"] == "unknown"
