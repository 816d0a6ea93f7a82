"""The results store as `serve` reads it: no duplicate campaign from `latest`, results as counts,
and each run's expectation (from the campaign that ran it) for the trend squares."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.store import list_campaigns, list_runs


def make_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    runs = {}
    for name, verdict in (("hw-unsafe", False), ("hw-safe", True), ("kill-safe", False), ("alone", True)):
        run = store / name / "20261122T070000"
        run.mkdir(parents=True)
        (run / "test.json").write_text(json.dumps({"config": {"time_limit": 5}}))
        (run / "results.json").write_text(json.dumps({"valid": verdict, "anomalies": {}}))
        runs[name] = run
    tests = [
        {"name": "hw-unsafe", "expect": ["invalid"], "verdict": "invalid", "as_expected": True},
        {"name": "hw-safe", "expect": ["valid"], "verdict": "valid", "as_expected": True},
        {"name": "kill-safe", "expect": ["valid"], "verdict": "invalid", "as_expected": False},
        {"name": "skipped", "expect": ["valid"], "verdict": "skipped", "as_expected": True},
    ]
    for t in tests:
        if t["name"] in runs:
            t["run_dir"] = str(runs[str(t["name"])])
    out = store / "campaigns" / "smoke" / "20261122T073928"
    out.mkdir(parents=True)
    summary = {"campaign": "smoke", "as_expected": False, "counts": {}, "tests": tests, "seconds": 9.0}
    (out / "summary.json").write_text(json.dumps(summary))
    os.symlink(out, store / "campaigns" / "smoke" / "latest")
    return store


def test_latest_is_not_a_second_campaign_and_the_result_counts_tests(tmp_path: Path) -> None:
    [campaign] = list_campaigns(make_store(tmp_path))
    assert campaign.stamp == "20261122T073928"
    assert (campaign.expected, campaign.tests, campaign.result) == (3, 4, "3/4 as expected")


def test_runs_know_whether_they_were_as_expected(tmp_path: Path) -> None:
    runs = {r.name: r for r in list_runs(make_store(tmp_path))}
    assert (runs["hw-unsafe"].verdict, runs["hw-unsafe"].expectation) == ("invalid", "as-expected")
    assert (runs["kill-safe"].verdict, runs["kill-safe"].expectation) == ("invalid", "not-expected")
    assert runs["hw-safe"].expect == ("valid",) and runs["hw-safe"].as_expected is True
    assert runs["alone"].as_expected is None and runs["alone"].expectation == "no-expectation"


def test_a_checked_run_without_outcome_was_killed(tmp_path: Path) -> None:
    runs = {r.name: r for r in list_runs(make_store(tmp_path))}
    assert runs["alone"].status == "killed"  # results.json, no outcome.json: checked after a SIGKILL
