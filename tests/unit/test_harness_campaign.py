"""Campaigns: matrix expansion, scenario entries, budget, summary/index/JUnit, exit code on a miss.

Runs are stood in for (each returns a chosen verdict) so the campaign logic is tested alone; the
real runs are covered by the run tests.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from rich.console import Console

from foundation.errors import BadInput
from harness import campaign as campaign_module
from harness.campaign import load_campaign, run_campaign
from harness.run import RunOutcome

CAMPAIGN = """
name = "mini"
budget = 1000
[defaults]
time_limit = 5
checker = "reference"
[[test]]
name = "safe"
matrix = { nemesis = ["kill", "partition"], seed = [1, 2] }
expect = "valid"
[[test]]
name = "hw"
variant = "high-watermark"
nemesis = "kill"
seed = 3
expect = ["invalid"]
[[test]]
scenario = "kip-101-truncation"
seed = 101
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_matrix_and_scenarios_expand(tmp_path: Path) -> None:
    c = load_campaign(write(tmp_path, CAMPAIGN), store=str(tmp_path / "store"))
    names = [(t.name, t.config.seed, t.expect) for t in c.tests]
    assert names == [
        ("safe-kill", 1, ("valid",)),
        ("safe-kill", 2, ("valid",)),
        ("safe-partition", 1, ("valid",)),
        ("safe-partition", 2, ("valid",)),
        ("hw", 3, ("invalid",)),
        ("kip-101-truncation-unsafe", 101, ("invalid",)),
        ("kip-101-truncation-safe", 101, ("valid",)),
    ]
    assert c.tests[0].config.nemesis == ("kill",) and c.tests[0].config.time_limit == 5
    assert c.tests[5].config.variant == "high-watermark" and c.tests[6].config.variant == "leader-epoch"
    assert c.tests[5].config.schedule and c.tests[5].config.store == str(tmp_path / "store")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[test]]\nname = "x"\nexpect = "fine"\n', "expect must be"),
        ('[[test]]\nname = "x"\n', "needs expect"),
        ('[[test]]\nname = "x"\nexpect = "valid"\nacks = "most"\n', "test[0] (x): config key 'acks'"),
        (
            '[[test]]\nname = "x"\nexpect = "valid"\n[[test]]\nname = "y"\nexpect = "valid"\nacks = "7"\n',
            "test[1] (y): config key 'acks'",
        ),
        (
            '[defaults]\ntime_limt = 10\n[[test]]\nname = "x"\nexpect = "valid"\n',
            "[defaults]: config key 'time_limt'",
        ),
        ("defaults = 3\n", "[defaults] must be a table, got 3"),
        ("test = 5\n", "test must be an array of tables ([[test]] entries), got 5"),
        (
            '[[test]]\nname = "x"\nexpect = "valid"\nmatrix = { seed = 1 }\n',
            "matrix.seed must be a non-empty list",
        ),
        ('[[test]]\nscenario = "nope"\n', "unknown scenario"),
        ("budgit = 3\n", "unknown key 'budgit'"),
        ("name = [\n", "malformed campaign"),
    ],
)
def test_bad_campaigns_name_the_entry_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(
        BadInput, match=needle.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")
    ):
        load_campaign(path)


def test_run_writes_summary_index_and_junit_and_flags_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    c = load_campaign(write(tmp_path, CAMPAIGN), store=str(store))
    verdicts = {"safe-kill": "valid", "safe-partition": "valid", "hw": "valid"}  # hw misses: expected invalid

    def fake_run(test: Any, console: Any = None) -> RunOutcome:
        config = test.config
        run = store / config.name / f"2026{len(list(store.glob('*/*'))):04d}"
        run.mkdir(parents=True)
        verdict = verdicts.get(config.name, "invalid" if config.name.endswith("unsafe") else "valid")
        (run / "report.html").write_text("<html></html>")
        results = {
            "valid": verdict == "valid",
            "anomalies": {"lost-write": {"count": 0 if verdict == "valid" else 3}},
        }
        return RunOutcome(run_dir=run, verdict=verdict, exit_code=0, results=results)

    monkeypatch.setattr(campaign_module, "run_test", fake_run)
    out_dir, results = run_campaign(c, store, Console(quiet=True))
    assert [r.as_expected for r in results] == [True, True, True, True, False, True, True]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["as_expected"] is False and summary["counts"]["valid"] == 6
    suite = ET.parse(out_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "7" and suite.get("failures") == "1"
    failure = suite.find("testcase[@name='hw seed=3']/failure")
    assert failure is not None
    assert failure.get("message") == f"expected invalid, got valid; report: {results[4].run_dir}/report.html"
    out = suite.find("testcase[@name='hw seed=3']/system-out")
    assert out is not None and (out.text or "").startswith(f"verdict: valid {results[4].run_dir}\n")
    index = (out_dir / "index.html").read_text()
    assert 'data-ok="false"' in index and "../../../hw/" in index and "lost-write ×3" in index
    assert (store / "campaigns" / "mini" / "latest").resolve() == out_dir


def test_budget_skips_what_no_longer_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = load_campaign(write(tmp_path, CAMPAIGN.replace("budget = 1000", "budget = 50")), store=str(tmp_path))
    monkeypatch.setattr(campaign_module, "run_test", lambda test, console=None: pytest.fail("nothing fits"))
    out_dir, results = run_campaign(c, tmp_path, Console(quiet=True))
    assert {r.verdict for r in results} == {"skipped"} and all(r.as_expected for r in results)
    suite = ET.parse(out_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "7"


def test_sample_campaigns_load() -> None:
    root = Path(__file__).resolve().parents[2] / "campaigns"
    smoke = load_campaign(root / "smoke.toml")
    nightly = load_campaign(root / "nightly.toml")
    assert smoke.budget <= 600 and len(smoke.tests) >= 3
    names = {t.name for t in nightly.tests}
    for fault in ("kill", "restart", "pause", "partition", "loss", "delay", "bandwidth", "clock"):
        assert f"safe-{fault}" in names
    for unsafe in (
        "kip-101-truncation-unsafe",
        "acks-1-leader-crash-unsafe",
        "min-isr-1-unsafe",
        "unclean-election-unsafe",
        "kip-966-last-replica-standing-unsafe",
        "kip-903-empty-disk-unsafe",
        "kip-279-fast-leader-change-unsafe",
    ):
        assert unsafe in names
    for damaged in ("corrupt_bitflip", "corrupt_truncate", "corrupt_wipe", "corrupt+kill"):
        assert f"safe-corrupt-{damaged}" in names
    assert {"bitflip-minority-unsafe", "bitflip-minority-safe"} <= names


def test_junit_failure_message_names_the_anomalies_and_the_report(tmp_path: Path) -> None:
    from harness.campaign import TestResult, failure_message

    c = load_campaign(write(tmp_path, CAMPAIGN), store=str(tmp_path))
    test = c.tests[0]
    r = TestResult(test, "invalid", 3.0, tmp_path / "run", {"log-divergence": 1, "lost-write": 2})
    assert failure_message(r) == (
        f"expected {'|'.join(test.expect)}, got invalid: log-divergence ×1, lost-write ×2;"
        f" report: {tmp_path / 'run' / 'report.html'}"
    )
    assert failure_message(TestResult(test, "unknown", reason="cluster did not come up")).endswith(
        "got unknown: cluster did not come up"
    )


def test_every_test_checks_with_spark_unless_told_otherwise(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "campaigns"
    smoke = load_campaign(root / "smoke.toml")
    assert {t.config.checker for t in smoke.tests} == {"spark"}  # scenario entries too
    told = load_campaign(root / "smoke.toml", checker="reference")
    assert {t.config.checker for t in told.tests} == {"reference"}
    path = tmp_path / "mini.toml"
    path.write_text(CAMPAIGN)
    # The file's defaults reach scenario entries as well as plain ones.
    assert {t.config.checker for t in load_campaign(path).tests} == {"reference"}


def test_any_test_key_may_be_a_default_and_rows_carry_their_matrix_values(tmp_path: Path) -> None:
    text = """
[defaults]
expect = "invalid"
variant = "high-watermark"
matrix = { seed = [2101, 2102] }
[[test]]
name = "hw-kill"
nemesis = "kill"
[[test]]
name = "le-kill"
variant = "leader-epoch"
expect = "valid"
matrix = { acks = ["all"] }
"""
    c = load_campaign(write(tmp_path, text), store=str(tmp_path))
    rows = [(t.label, t.expect, t.config.variant) for t in c.tests]
    assert rows == [
        ("hw-kill seed=2101", ("invalid",), "high-watermark"),
        ("hw-kill seed=2102", ("invalid",), "high-watermark"),
        ("le-kill-all seed=2101 acks=all", ("valid",), "leader-epoch"),
        ("le-kill-all seed=2102 acks=all", ("valid",), "leader-epoch"),
    ]


def test_a_refused_row_is_neither_a_pass_nor_a_miss_and_is_counted_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '[[test]]\nname = "d"\nexpect = "valid"\nmatrix = { nemesis = ["delay", "kill"], seed = [7] }\n'
    c = load_campaign(write(tmp_path, text), store=str(tmp_path))
    reason = "fault 'delay' cannot run here: tc netem is not available on n1"

    def fake_run(test: Any, console: Any = None) -> RunOutcome:
        config = test.config
        run = tmp_path / config.name / "20260101T000000"
        run.mkdir(parents=True)
        if "delay" in config.nemesis:
            return RunOutcome(run_dir=run, status="refused", reason=reason, exit_code=2)
        return RunOutcome(run_dir=run, verdict="valid", exit_code=0, results={"valid": True})

    monkeypatch.setattr(campaign_module, "run_test", fake_run)
    out_dir, results = run_campaign(c, tmp_path, Console(quiet=True))
    assert [(r.test.label, r.verdict, r.as_expected) for r in results] == [
        ("d-delay nemesis=delay seed=7", "refused", True),
        ("d-kill nemesis=kill seed=7", "valid", True),
    ]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["counts"] == {
        "valid": 1,
        "invalid": 0,
        "unknown": 0,
        "refused": 1,
        "skipped": 0,
        "underpowered": 0,
    }
    assert summary["as_expected"] is True and summary["tests"][0]["name"] == "d-delay nemesis=delay seed=7"
    suite = ET.parse(out_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("skipped"), suite.get("failures")) == ("1", "0")
    skipped = suite.find("testcase[@name='d-delay nemesis=delay seed=7']/skipped")
    assert skipped is not None and skipped.get("message") == f"refused: {reason}"
    index = (out_dir / "index.html").read_text()
    assert f"refused: {escape(reason)}" in index and "1 refused" in index and 'data-ok="true"' in index


def test_a_fault_the_config_cannot_run_is_refused_before_the_campaign_starts(tmp_path: Path) -> None:
    text = '[[test]]\nname = "p"\nexpect = "valid"\nnodes = 3\nmatrix = { nemesis = ["kill", "partition:ring"] }\n'
    with pytest.raises(BadInput, match=r"test\[0\] \(p-partition_ring nemesis=partition:ring\): .*ring"):
        load_campaign(write(tmp_path, text))
