"""`strandline analyze` without Spark: bad input, and how run directories become rows (torn ones
included), fault windows, setting labels and links."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.analyze.page import setting_labels
from harness.analyze.runs import fault_mix, merged_windows, read_run, read_store, relative_link
from harness.analyze.spark import RUN_COLUMNS, local_path, spark_path, spark_row
from harness.cli import main


def test_a_missing_store_is_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--store", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"strandline analyze: no results store at {tmp_path / 'nowhere'} (run a test first, or pass --store DIR)"
    ]


def test_a_store_without_runs_is_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "campaigns" / "nightly" / "20260101T000000").mkdir(parents=True)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.txt").write_text("not a run")
    assert main(["analyze", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"strandline analyze: no run in {tmp_path}")
    assert not (tmp_path / "analysis").exists() and not list(tmp_path.glob(".analysis*"))


def _run(store: Path, name: str, stamp: str = "20260101T000000", **files: object) -> Path:
    run = store / name / stamp
    run.mkdir(parents=True)
    for file, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (run / file.replace("_", ".", 1)).write_text(text)
    return run


def test_torn_and_hostile_run_directories_become_rows_never_errors(tmp_path: Path) -> None:
    config = {"variant": "high-watermark", "nemesis": ["kill"], "time_limit": 20, "acks": "all"}
    old = 1_700_000_000
    killed = _run(tmp_path, "killed", test_json={"config": config}, history_jsonl="")
    os.utime(killed / "history.jsonl", (old, old))
    _run(tmp_path, "running", test_json={"config": config}, history_jsonl="")
    _run(
        tmp_path,
        "interrupted",
        test_json={"config": config},
        outcome_json={"status": "interrupted", "timings": {"total": 5}},
        # Stretches without an acknowledged send count within the load only (0 to 20 s): 3 + 5 s.
        results_json={
            "valid": True,
            "stats": {
                "unavailable": [
                    {"start_s": 2.0, "end_s": 5.0, "seconds": 3.0},
                    {"start_s": 15.0, "end_s": 31.0, "seconds": 16.0},
                ]
            },
        },
    )
    _run(
        tmp_path,
        "hostile",
        test_json={"config": {"time_limit": "soon", "min_insync": True, "nemesis": 7, "seed": 1.5}},
        outcome_json=["not", "an", "object"],
        results_json={
            "valid": False,
            "anomalies": {"lost-write": {"count": "many"}, "<b>x</b>": {"count": 2}},
            "stats": {"first_fault_s": "early", "unavailable": "none", "fault_windows": [{"start_s": 1}]},
            "checker": [],
        },
    )
    _run(tmp_path, "torn", test_json='{"config": {', results_json="")
    rows = {r.name: r for r in read_store(tmp_path).runs}
    assert {n: (r.status, r.verdict, r.problem) for n, r in rows.items()} == {
        "killed": ("killed", "", "no results.json"),
        "running": ("running", "", "no results.json"),
        "interrupted": ("interrupted", "unknown", ""),  # valid but cut short
        "hostile": ("killed", "invalid", ""),
        "torn": ("killed", "", "no readable test.json; results.json unreadable"),
    }
    assert rows["interrupted"].unavailable_s == 8.0 and rows["interrupted"].availability == 0.6
    assert rows["interrupted"].run_s == 5
    hostile = rows["hostile"]
    assert (hostile.time_limit_s, hostile.min_insync, hostile.mix, hostile.seed) == (None, None, "", None)
    assert (
        hostile.anomalies == "<b>x</b>×2" and hostile.first_fault_s is None and hostile.availability is None
    )


def test_fault_windows_are_clipped_to_the_load_and_merged() -> None:
    stats = {
        "fault_windows": [
            {"start_s": 12.0, "end_s": 30.0},
            {"start_s": 2.0, "end_s": 5.0},
            {"start_s": 4.0, "end_s": 6.5},
            {"start_s": 25.0, "end_s": 26.0},
            {"start_s": "x", "end_s": 3},
        ]
    }
    assert merged_windows(stats, 20.0) == [(2.0, 6.5), (12.0, 20.0)]
    assert merged_windows(stats, None) == [(2.0, 6.5), (12.0, 30.0)]


def test_the_fault_mix_is_the_nemesis_or_the_scripted_kinds() -> None:
    assert fault_mix({"nemesis": ["kill", "partition+clock"]}) == "kill,partition+clock"
    assert fault_mix({"nemesis": []}) == "none"
    schedule = [{"do": "kill"}, {"wait": 3}, {"do": "start"}, {"do": "kill"}]
    assert fault_mix({"nemesis": ["kill"], "schedule": schedule}) == "scripted: kill+start"


def test_setting_labels_name_what_differs_between_rows() -> None:
    base = {
        "system": "own",
        "variant": "leader-epoch",
        "acks": "all",
        "min_insync": 2,
        "replication_factor": 3,
        "unclean_election": False,
        "fsync": 0,
        "other": "",
    }
    rows = [
        {**base, "mix": "kill"},
        {**base, "min_insync": 1, "fsync": 1, "mix": "kill"},
        {**base, "unclean_election": True, "mix": "all"},
    ]
    assert setting_labels(rows) == [
        "min.insync=2 · clean election · no fsync under kill",
        "min.insync=1 · clean election · fsync each message under kill",
        "min.insync=2 · unclean election · no fsync under all",
    ]
    assert setting_labels([{**base, "mix": "none"}]) == ["leader-epoch · acks=all under none"]


def test_links_and_paths_survive_odd_names() -> None:
    assert relative_link("a b/2026%x/report.html") == "../a%20b/2026%25x/report.html"
    assert spark_path("/s/x[1]/h{a,b}*?") == r"/s/x\[1\]/h\{a,b\}\*\?"
    assert local_path("file:/tmp/a%20b%2520c/o.parquet") == "/tmp/a b%20c/o.parquet"
    assert local_path("file:///tmp/x/o.parquet") == "/tmp/x/o.parquet"


def test_a_run_row_knows_its_report_and_campaign_free_state(tmp_path: Path) -> None:
    run = _run(tmp_path, "solo", test_json={"config": {"nemesis": ["pause"]}}, report_html="<html></html>")
    row = read_run(run, now=0.0)
    assert (row.run, row.report, row.campaign, row.mix, row.started) == (
        "solo/20260101T000000",
        "solo/20260101T000000/report.html",
        "",
        "pause",
        "2026-01-01 00:00:00",
    )


def test_whole_numbers_reach_spark_as_floats_in_float_columns(tmp_path: Path) -> None:
    # A fault-free run: no stretch without acknowledged sends, no fault window (sums of nothing).
    run = _run(
        tmp_path,
        "calm",
        test_json={"config": {"time_limit": 20, "nemesis": []}},
        outcome_json={"status": "completed", "timings": {"total": 31}},
        results_json={
            "valid": True,
            "stats": {"unavailable": [], "fault_windows": [], "first_fault_s": 3},
            "checker": {"seconds": 2},
        },
    )
    row = read_run(run)
    assert (row.unavailable_s, row.availability, row.faulted_s) == (0.0, 1.0, 0.0)
    values = dict(zip(RUN_COLUMNS, spark_row(row), strict=True))
    for name in (
        "unavailable_s",
        "faulted_s",
        "time_limit_s",
        "first_fault_s",
        "run_s",
        "check_s",
        "availability",
    ):
        assert type(values[name]) is float, name
    assert type(values["acked"]) is not float and values["unclean_election"] is None
