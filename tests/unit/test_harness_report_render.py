"""The report renders from a hand-written run dir: verdict words, charts, anomalies, replica bars.

The run dir is written here as `strandline run` would leave it: a history with a KIP-101 style
loss on t0-1, results.json naming it, and data dirs written in Kafka's on-disk format (kafka.record
batches, checkpoints) where one replica misses acknowledged offsets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.report import build_context, write_report
from harness.report.faults import shaded_windows as fault_windows
from harness.report.history import digest_of, read_evidence
from harness.report.replicas import marks_from_results, partition_logs
from tests.support.report_runs import NS, make_run


def test_replica_logs_are_drawn_from_the_evidence_with_marks(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    logs = partition_logs(read_evidence(run / "evidence.json"))
    assert set(logs) == {("t0", 0), ("t0", 1)}
    r = logs[("t0", 1)].replicas["n1"]
    assert r.epochs == [(0, 0), (1, r.epochs[1][1])]
    assert r.high_watermark == r.log_end
    results = json.loads((run / "results.json").read_text())
    marks = marks_from_results(results, logs[("t0", 1)])
    assert len(marks["n2"].missing_acked) == 3 and not marks["n1"].missing_acked
    assert marks["n1"].divergent == marks["n2"].divergent and len(marks["n1"].divergent) == 3
    # the records the checker quoted: those at the marked offsets, as each replica holds them
    lost = sorted(marks["n2"].missing_acked)
    assert sorted(logs[("t0", 1)].replicas["n2"].records) == lost
    assert all(logs[("t0", 1)].replicas["n2"].records[o][0] == 900000 + o for o in lost)
    assert all(r.records[o][0] < 900000 for o in lost)


def test_fault_windows_pair_kill_with_start(tmp_path: Path) -> None:
    digest = digest_of(read_evidence(make_run(tmp_path / "run") / "evidence.json"))
    windows = fault_windows(digest.nemesis)
    assert [(w.f, round(w.start_s), round(w.end_s or 0)) for w in windows] == [
        ("kill", 10, 12),
        ("kill", 20, 26),
    ]
    assert windows[1].label == "kill leader n1"


def test_headline_names_count_partition_and_fault(tmp_path: Path) -> None:
    ctx = build_context(make_run(tmp_path / "run"))
    assert ctx["verdict"] == "invalid"
    assert (
        ctx["sentences"][0]
        == "3 acknowledged writes were lost on t0-1 after the leader n1 was killed at 20.0 s."
    )
    assert [a.name for a in ctx["anomalies"]] == ["lost-write"]
    example = ctx["anomalies"][0].examples[0]
    assert [o["type"] for o in example.ops] == ["ok"] and "→" in example.ops[0]["time"]
    assert any("absent" not in t and "value 900" in t for _n, t in example.replicas)
    assert ctx["pictures"][0]["name"] == "t0-1" and ctx["pictures"][0]["affected"]


def test_valid_run_says_so(tmp_path: Path) -> None:
    ctx = build_context(make_run(tmp_path / "run", lost=False))
    assert ctx["verdict"] == "valid"
    assert ctx["sentences"][0].startswith("No anomaly found: all ")
    assert "through 2 kills" in ctx["sentences"][0]


def test_report_is_self_contained_and_escapes_everything(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", evil=True)
    html = write_report(run).read_text()
    assert "<script" not in html.lower().replace("&lt;script", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    for anchor in (
        'id="verdict"',
        'id="rate-chart"',
        'id="latency-chart"',
        'class="replica-chart"',
        'href="history.jsonl"',
        'href="nodes/n1/logs/broker.log"',
    ):
        assert anchor in html


def test_report_of_an_empty_or_unchecked_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "test.json").write_text(json.dumps({"config": {"name": "x", "time_limit": 5}, "seed": 1}))
    (run / "history.jsonl").write_text(
        '{"index":0,"time":5,"process":0,"type":"invoke","f":"send","topic":"t0","partition":0,"value":1}\n{"torn'
    )
    html = write_report(run).read_text()
    assert "Not checked yet" in html


def test_fault_windows_follow_fault_ids_and_roles() -> None:
    def op(t: float, type_: str, f: str, value: dict[str, Any]) -> dict[str, Any]:
        return {"index": 0, "time": int(t * NS), "process": "nemesis", "type": type_, "f": f, "value": value}

    ops = [
        op(1, "invoke", "kill", {"target": "leader", "topic": "t0", "partition": 0, "fault_id": "kill-1"}),
        op(1.1, "ok", "kill", {"nodes": ["n1"], "fault_id": "kill-1"}),
        op(2, "invoke", "partition", {"grudge": "halves", "fault_id": "partition-2"}),
        op(
            2.1,
            "ok",
            "partition",
            {
                "shape": "halves",
                "grudge": {"n1": ["n2"]},
                "components": [["n1"], ["n2", "n3"]],
                "fault_id": "partition-2",
            },
        ),  # fmt: skip
        op(5, "invoke", "heal", {"fault": "partition", "fault_id": "partition-2", "nodes": ["n1"]}),
        op(5.2, "ok", "heal", {"fault": "partition", "fault_id": "partition-2"}),
        op(6, "invoke", "start", {"fault": "kill", "fault_id": "kill-1", "nodes": ["n1"]}),
        op(6.5, "ok", "start", {"fault": "kill", "fault_id": "kill-1", "nodes": ["n1"]}),
        op(7, "invoke", "restart", {"target": "n2", "fault_id": "restart-3"}),
        op(8, "ok", "restart", {"nodes": ["n2"], "fault_id": "restart-3"}),
    ]
    windows = fault_windows(ops)
    assert [(w.label, w.start_s, w.end_s) for w in windows] == [
        ("kill leader n1", 1.0, 6.5),
        ("partition n1 | n2 n3", 2.0, 5.2),
        ("restart n2", 7.0, 8.0),
    ]


def test_a_run_that_tested_too_little_says_so_and_shows_its_power(tmp_path: Path) -> None:
    """The report reads `power` from results.json (it never counts it itself): the headline says
    why a clean run is unknown, the panel marks the fault window without load."""
    from checkers.api import check_run
    from checkers.engines import REFERENCE

    run = make_run(tmp_path / "run", lost=False)
    results = check_run(run, REFERENCE)
    window = results["power"]["windows"][0]
    results.update(valid="unknown", underpowered=True)
    results["power"].update(enough=False, reasons=["too little load: none in 1 of 2 fault windows"])
    results["power"]["windows"][0] = {**window, "acked_writes": 0, "loaded": False}
    (run / "results.json").write_text(json.dumps(results))
    ctx = build_context(run)
    assert ctx["verdict"] == "unknown"
    said = "o anomaly found, but the run tested too little (too little load: none in 1 of 2 fault windows)."
    assert any(s.endswith(said) for s in ctx["sentences"]), ctx["sentences"]
    rows = ctx["power"]["rows"]
    assert [r.what for r in rows][:1] == ["the whole load"] and not rows[2].loaded and rows[2].acked == "0"
    html = write_report(run).read_text()
    assert "How much was tested" in html and "no load" in html
