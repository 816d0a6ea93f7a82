"""`strandline analyze` on Spark over a store with two campaigns (three campaign runs) and runs cut
short every way (tests/support/analyze_store.py): the tables' exact content, the page in a real
headless Chromium, `serve`'s link to it, and `campaign` running it at its end."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from harness import browser
from harness import campaign as campaign_module
from harness.cli import main
from harness.run import RunOutcome
from harness.serve import render_index
from tests.support.analyze_store import HOSTILE, build_store
from tests.support.report_runs import make_run

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


def strandline(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def analysed(scratch: Path, spark: Any) -> tuple[Path, str]:
    store = build_store(scratch / "store")
    code, out = strandline("analyze", "--store", str(store))
    assert code == 0, out
    return store, out


def table(store: Path, name: str) -> list[dict[str, str]]:
    with (store / "analysis" / f"{name}.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_the_command_says_what_it_found_and_where_the_page_is(analysed: tuple[Path, str]) -> None:
    store, out = analysed
    lines = out.strip().splitlines()
    assert lines[-1] == f"analysis: {store / 'analysis' / 'index.html'}"
    assert lines[-2].startswith(
        "11 runs: 4 valid, 3 invalid, 1 unknown, 3 not judged; 5 settings x fault mixes; 3 campaign runs; in "
    )
    assert sorted(p.name for p in (store / "analysis").iterdir()) == [
        "index.html",
        *(f"{t}.{kind}" for t in ("nights", "runs", "settings") for kind in ("csv", "parquet")),
    ]


SETTINGS = [
    # variant, acks, mix, runs, judged, valid, invalid, unknown, invalid_rate, refused, cut_short,
    # unchecked, runs_with_loss, acked, acked_lost, median s to loss, with_history
    ("high-watermark", "all", "kill", 3, 2, 0, 2, 0, "1.0", 0, 1, 1, 2, "2078", "6", "6.95", 1),
    ("leader-epoch", "1", "kill", 2, 2, 1, 1, 0, "0.5", 0, 0, 0, 1, "2078", "3", "6.95", 1),
    ("leader-epoch", "all", "kill", 4, 3, 2, 0, 1, "0.0", 0, 1, 1, 0, "3117", "0", "", 1),
    ("leader-epoch", "all", "none", 1, 1, 1, 0, 0, "0.0", 0, 0, 0, 0, "1039", "0", "", 0),
    ("leader-epoch", "all", "delay", 1, 0, 0, 0, 0, "", 1, 0, 0, 0, "", "", "", 0),
]


def test_settings_table_counts_and_rates(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    rows = table(store, "settings")
    keys = (
        "variant",
        "acks",
        "mix",
        "runs",
        "judged",
        "valid",
        "invalid",
        "unknown",
        "invalid_rate",
        "refused",
        "cut_short",
        "unchecked",
        "runs_with_loss",
        "acked",
        "acked_lost",
        "median_fault_to_loss_s",
        "with_history",
    )
    assert [tuple(r[k] for k in keys) for r in rows] == [tuple(map(str, s)) for s in SETTINGS]
    for r in rows:  # the columns every run shares
        assert (r["system"], r["min_insync"], r["replication_factor"], r["unclean_election"], r["fsync"]) == (
            "own",
            "2",
            "3",
            "false",
            "0",
        )
    # Availability: 1 - 3.029 s without an acknowledged send / 25 s of load, in every checked run.
    assert [r["availability_mean"] for r in rows] == ["0.8788"] * 4 + [""]
    # The Parquet file holds the same rows, typed.
    parquet = pq.read_table(store / "analysis" / "settings.parquet").to_pylist()
    assert [(p["variant"], p["mix"], p["invalid"], p["invalid_rate"]) for p in parquet] == [
        (s[0], s[2], s[6], float(s[8]) if s[8] else None) for s in SETTINGS
    ]
    assert parquet[0]["unclean_election"] is False and parquet[0]["acked_lost"] == 6


def test_runs_table_counts_every_run_as_what_it_is(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    rows = {r["run"]: r for r in table(store, "runs")}
    assert len(rows) == 11
    seen = {run: (r["status"], r["verdict"], r["campaign"], r["as_expected"]) for run, r in rows.items()}
    assert seen == {
        "hw-kill/20261120T010100": ("completed", "invalid", "nightly", "true"),
        "safe-kill/20261120T010200": ("completed", "valid", "nightly", "true"),
        "acks1-kill/20261120T010300": ("completed", "valid", "nightly", "false"),
        "hw-kill/20261121T010100": ("completed", "invalid", "nightly", "true"),
        "safe-kill/20261121T010200": ("completed", "valid", "nightly", "true"),
        "acks1-kill/20261121T010300": ("completed", "invalid", "nightly", "true"),
        "safe-none/20261121T050100": ("completed", "valid", "smoke", "true"),
        "safe-delay/20261121T050200": ("refused", "", "smoke", "true"),
        "adhoc-hw/20261119T000000": ("killed", "", "", ""),
        f"{HOSTILE}/20261119T010000": ("completed", "", "", ""),
        "safe-kill/20261119T020000": ("interrupted", "unknown", "", ""),
    }
    assert rows["adhoc-hw/20261119T000000"]["problem"] == "no results.json"
    assert rows[f"{HOSTILE}/20261119T010000"]["problem"] == "results.json unreadable"
    assert rows["safe-delay/20261121T050200"]["problem"].startswith("refused: fault 'delay' cannot run here")
    lost = rows["hw-kill/20261120T010100"]
    assert (lost["acked_lost"], lost["first_fault_s"], lost["first_lost_ack_s"], lost["fault_to_loss_s"]) == (
        "3",
        "10.05",
        "17.0",
        "6.95",
    )
    assert lost["report"] == "hw-kill/20261120T010100/report.html"


def _oracle(run: Path) -> tuple[int, float, float]:
    """Operations, and acknowledged sends per second under faults and without, from the history."""
    results = json.loads((run / "results.json").read_text())
    limit = json.loads((run / "test.json").read_text())["config"]["time_limit"]
    windows = sorted(
        (max(0.0, w["start_s"]), min(w["end_s"], limit)) for w in results["stats"]["fault_windows"]
    )
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    client = [o for o in ops if o["process"] != "nemesis"]
    acks = [o["time"] / 1e9 for o in client if o["f"] == "send" and o["type"] == "ok"]
    acks = [t for t in acks if 0 <= t <= limit]
    faulted = sum(1 for t in acks if any(a <= t <= b for a, b in windows))
    faulted_s = sum(b - a for a, b in windows)
    operations = sum(1 for o in client if o["type"] == "invoke")
    return operations, faulted / faulted_s, (len(acks) - faulted) / (limit - faulted_s)


def test_history_figures_come_from_the_parquet_form_where_it_exists(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    rows = {r["run"]: r for r in table(store, "runs")}
    for run in ("hw-kill/20261121T010100", "safe-kill/20261121T010200", "acks1-kill/20261121T010300"):
        operations, faulted, calm = _oracle(store / run)
        r = rows[run]
        assert int(r["ops"]) == operations
        assert float(r["acked_faulted_per_s"]) == pytest.approx(faulted, abs=1e-3)
        assert float(r["acked_calm_per_s"]) == pytest.approx(calm, abs=1e-3)
        assert float(r["kept_under_faults"]) == pytest.approx(faulted / calm, abs=1e-4)
        assert 0 < float(r["kept_under_faults"]) < 1  # sends failed while the leader was down
    assert rows["hw-kill/20261120T010100"]["ops"] == ""  # no Parquet form: no history figures


def test_nights_table_trends_each_campaign(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    keys = (
        "campaign",
        "night",
        "tests",
        "as_expected",
        "skipped",
        "runs",
        "judged",
        "valid",
        "invalid",
        "acked_lost",
    )
    assert [tuple(r[k] for k in keys) for r in table(store, "nights")] == [
        ("nightly", "20261120T010000", "3", "2", "0", "3", "3", "2", "1", "3"),
        ("nightly", "20261121T010000", "4", "4", "1", "3", "3", "1", "2", "6"),
        ("smoke", "20261121T050000", "2", "2", "0", "2", "1", "1", "0", "0"),
    ]


def test_page_draws_in_chromium_and_escapes_every_value(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    page = store / "analysis" / "index.html"
    dom = browser.dump_dom(page)
    assert dom.ok and dom.console == [], dom.console
    html = dom.output
    assert 'data-runs="11"' in html
    for verdict, count in (("valid", 4), ("invalid", 3), ("unknown", 1), ("not-judged", 3)):
        assert f'id="count-{verdict}" data-count="{count}"' in html
    # Five settings rows; plots: invalid, lost, time to loss, availability, under faults, and two
    # per campaign (verdicts and writes lost across its runs).
    assert html.count('class="setting"') == 5
    assert html.count("<svg") == 5 + 2 * 2
    assert (
        'data-campaign="nightly" data-nights="2"' in html and 'data-campaign="smoke" data-nights="1"' in html
    )
    assert html.count('class="trend"') == 3 + 2  # nightly's three tests, smoke's two
    assert html.count('class="lossy"') == 3 and html.count('class="slow"') == 10
    assert html.count('class="unjudged"') == 3
    # Every link to a report points at a file of the store.
    for href in ("../hw-kill/20261120T010100/report.html", "../campaigns/nightly/20261121T010000/index.html"):
        assert f'href="{href}"' in html and (page.parent / href).is_file()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    shot = store / "analysis.png"
    assert browser.screenshot(page, shot, height=browser.page_height(html)).ok
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


def test_serve_links_the_page(analysed: tuple[Path, str]) -> None:
    store, _ = analysed
    assert 'href="/files/analysis/index.html" id="analysis-link"' in render_index(store)


def test_campaign_analyses_the_store_at_its_end(
    scratch: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = scratch / "campaign-store"
    (scratch / "mini.toml").write_text(
        'name = "mini"\n[defaults]\nchecker = "reference"\ntime_limit = 25\n'
        '[[test]]\nname = "hw"\nvariant = "high-watermark"\nnemesis = "kill"\nexpect = "invalid"\n'
        '[[test]]\nname = "le"\nnemesis = "kill"\nexpect = "valid"\n'
    )

    def stand_in(test: Any, console: Console | None = None) -> RunOutcome:
        from checkers.api import check_run
        from checkers.engines import REFERENCE

        config = test.config
        run = make_run(store / config.name / "20261122T000000", lost=config.variant == "high-watermark")
        (run / "test.json").write_text(json.dumps({"config": config.to_json(), "seed": config.seed}))
        results = check_run(run, REFERENCE)
        verdict = "valid" if results["valid"] is True else "invalid"
        outcome = {"status": "completed", "verdict": verdict, "timings": {"total": 40.0}}
        (run / "outcome.json").write_text(json.dumps(outcome))
        return RunOutcome(run_dir=run, verdict=verdict, exit_code=0, results=results)

    monkeypatch.setattr(campaign_module, "run_test", stand_in)
    code, out = strandline("campaign", str(scratch / "mini.toml"), "--store", str(store))
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[-3].startswith(
        "2 runs: 1 valid, 1 invalid, 0 unknown, 0 not judged; 2 settings x fault mixes"
    )
    assert lines[-2] == f"analysis: {store / 'analysis' / 'index.html'}"
    assert lines[-1] == "campaign mini: 2/2 as expected"
    nights = table(store, "nights")
    assert [(n["campaign"], n["tests"], n["invalid"]) for n in nights] == [("mini", "2", "1")]
